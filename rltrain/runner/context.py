"""LoopContext: everything a training loop receives from the Runner, and nothing more."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rltrain.algos.configs.base import AlgoConfig
from rltrain.buffers.replay import ReplayBuffer
from rltrain.envs.vec_env import VecEnv
from rltrain.obs import Obs
from rltrain.parallel.world import SOLO, Solo
from rltrain.runner.callbacks import LoopState
from rltrain.runner.episode_stats import EpisodeTracker
from rltrain.runner.timing import SectionTimer
from rltrain.types import StepResult


def _no_hook(*args: Any) -> None:
    """A hook that does nothing (a context built outside a Runner, as in tests)."""


@dataclass
class LoopContext:
    """What the on- and off-policy loops read and update; the Runner builds one per run.

    A loop steps `env`, feeds `algo`, advances `state`, keeps `obs` current (checkpoints store
    it), records episodes, times its sections, calls `fire(event)` for callbacks and
    `end_iteration()` after each update (the Runner logs, evaluates, checkpoints and checks for a
    stop there). It never sees the Runner itself.
    """

    env: VecEnv
    algo: Any
    """The algorithm: `OnPolicyAlgorithm` or `OffPolicyAlgorithm` (`rltrain.algos.base`)."""
    cfg: AlgoConfig
    """`cfg.algo`, an `OnPolicyConfig` or `OffPolicyConfig`: the loop reads its own values there."""
    state: LoopState
    episodes: EpisodeTracker
    timer: SectionTimer
    device: torch.device
    obs: Obs
    """The observation the next action is taken from, `[N, *obs_shape]` (Dict observations:
    one such tensor per entry, see `rltrain/obs.py`)."""
    fire: Callable[[str], None] = _no_hook
    """Run the callbacks of one event (`callbacks.EVENTS`) with `state`."""
    end_iteration: Callable[[], None] = _no_hook
    """Called once per iteration, after the update: log, evaluate, checkpoint, stop checks."""
    replay: ReplayBuffer | None = None
    """The replay buffer (off-policy only; see `off_policy.make_replay`)."""
    collective: Solo = SOLO
    """The ranks of a torchrun job (`rltrain/parallel/world.py`); `SOLO` for one process."""
    episode_starts: torch.Tensor | None = None
    """Bool `[N]`: the rows whose `obs` begins an episode (None: all of them). The on-policy
    loop keeps it for recurrent policies; checkpoints store it."""


class LoopBatch(Protocol):
    """The runs a loop trains together: a seed batch (`seed_batch/batch.py` `SeedBatch`), or a
    single run as a batch of one (`runner/one_run.py` `OneRun`). The loops call nothing else."""

    algo: Any
    """The algorithm of every run, taking and returning every value per run, `x[k]` run k's
    (each run's own algorithm in turn: `runner/members.py`; or a stacked one:
    `seed_batch/stacked_calls.py`)."""
    ctxs: list[LoopContext]
    """Each run's context, in seed order (the runs still training)."""
    generators: list[torch.Generator | None]
    """The generator each run's replay samples with (None: the process-wide one)."""

    def fire(self, event: str) -> None:
        """Every run's callbacks of `event`."""

    def finished(self) -> bool:
        """The budget is spent (every run is at the same step), or a stop was asked for."""

    def step_envs(self, actions: Any) -> list[StepResult]:
        """One step of every run's env (`actions[k]`: run k's)."""

    def end_iteration(self) -> list[int]:
        """Each run logs, evaluates and checkpoints; returns the indices of the runs that go on."""
