"""A stacked algorithm (`PPO.stack`, `DQN.stack`, ...) as the loops call it.

The loops pass and receive every per-step value per run (a sequence of S: run k's observations
`obs[k]`, its minibatch `batches[k]`; `runner/members.py`). A stacked algorithm takes its inputs
with the seeds first, `[S, N, ...]`, and returns them so: these two classes stack what goes in
and split what comes out (views, one call each), and do nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import torch

from rltrain import obs as obs_ops
from rltrain.runner.members import PerRun, act_inputs
from rltrain.types import Metrics, RolloutBatch, TransitionBatch

Batch = TypeVar("Batch", RolloutBatch, TransitionBatch)


def stacked(runs: Sequence[Any] | None) -> Any:
    """Per-run tensors (or Dict observations) as one `[S, ...]`; None stays None."""
    return None if runs is None else obs_ops.stack(list(runs))


def stacked_batch(batches: Sequence[Batch]) -> Batch:
    """Per-run minibatches as one, each field `[S, B, ...]` (a field none of them has stays None)."""
    kind = type(batches[0])
    return kind(*(None if parts[0] is None else stacked(parts)
                  for parts in zip(*batches, strict=True)))


class StackedOnPolicy:
    """`act`, `value` and `update` of a stacked on-policy algorithm, per run. Stacked networks
    keep no memory (`nets/seeded.py` refuses a recurrent core), so no episode starts come in."""

    recurrent = False

    def __init__(self, algo: Any):
        self.algo = algo

    def act(self, obs: Sequence[Any], mask: PerRun | None = None,
            starts: PerRun | None = None) -> tuple[PerRun, PerRun, PerRun]:
        action, log_prob, value = self.algo.act(stacked(obs), **act_inputs(stacked(mask), None))
        return action.unbind(0), log_prob.unbind(0), value.unbind(0)

    @torch.no_grad()
    def value(self, obs: Sequence[Any], starts: PerRun | None = None,
              rows: PerRun | None = None) -> PerRun:
        """V `[N]` per run, every row evaluated (`rows`, the ones the caller wants, is for
        members evaluating alone: one batched product serves all rows here)."""
        return self.algo.value(stacked(obs)).unbind(0)

    def update(self, batches: Sequence[RolloutBatch],
               progress_remaining: float = 1.0) -> list[Metrics]:
        return self.algo.update(stacked_batch(batches), progress_remaining=progress_remaining)


class StackedOffPolicy:
    """`random_actions`, `act` and `update` of a stacked off-policy algorithm, per run."""

    def __init__(self, algo: Any):
        self.algo = algo

    def random_actions(self, num_envs: int, masks: PerRun | None = None) -> PerRun:
        extra = () if masks is None else (stacked(masks),)  # only DQN's calls take masks
        return self.algo.random_actions(num_envs, *extra).unbind(0)

    def act(self, obs: Sequence[Any], global_step: int, masks: PerRun | None = None) -> PerRun:
        extra = () if masks is None else (stacked(masks),)
        return self.algo.act(stacked(obs), global_step, *extra).unbind(0)

    def update(self, batches: Sequence[TransitionBatch], global_step: int) -> list[Metrics]:
        return self.algo.update(stacked_batch(batches), global_step)


def stacked_calls(algo: Any, family: str) -> StackedOnPolicy | StackedOffPolicy:
    """The loops' view of the stacked `algo` of an `on_policy` or `off_policy` family."""
    return StackedOnPolicy(algo) if family == "on_policy" else StackedOffPolicy(algo)
