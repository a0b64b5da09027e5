"""Typed loop state and the callback hooks fired by the training loops."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rltrain.errors import UserError

EVENTS = ("pre_iteration", "post_iteration", "pre_rollout", "post_rollout", "pre_update",
          "post_update")


@dataclass
class LoopState:
    """What callbacks see (and may change: set `stop=True` to end training after this iteration)."""

    total_timesteps: int
    global_step: int = 0
    """Env steps so far, summed over parallel envs."""
    iteration: int = 0
    """Completed iterations (on-policy: rollouts+updates; off-policy: env steps of the batch)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Metrics of the latest update."""
    last_eval: dict[str, Any] | None = None
    """Result of the latest evaluation (see `evaluation.run_episodes`)."""
    best_eval: float = float("-inf")
    """Best evaluation mean reward so far."""
    stop: bool = False
    """Set by a callback (or a signal) to stop after the current iteration."""
    stop_reason: str = ""


Callback = Callable[[LoopState], Any]


class Callbacks:
    """Event name -> list of callables taking the `LoopState`."""

    def __init__(self) -> None:
        self._hooks: dict[str, list[Callback]] = defaultdict(list)

    def add(self, event: str, fn: Callback) -> None:
        """Register `fn` for `event` (one of `EVENTS`)."""
        if event not in EVENTS:
            raise UserError(f"unknown callback event {event!r}: choose one of {', '.join(EVENTS)}")
        self._hooks[event].append(fn)

    def fire(self, event: str, state: LoopState) -> None:
        """Call every callback registered for `event`, in registration order."""
        for fn in self._hooks.get(event, ()):
            fn(state)
