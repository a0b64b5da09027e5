"""Seeds whose networks cannot run stacked, or whose algorithm has no stacked form: each
seed's own algorithm, in turn (`OnPolicyMembers`, `OffPolicyMembers`).

`nets/seeded.py` stacks networks of linear and normalization layers on vector observations.
A recurrent core (`ppo_lstm`), gSDE, an image or shared encoder, or a MultiDiscrete /
MultiBinary head it cannot stack; for those, and for an algorithm added without a stacked form
(its module has no `stack`), the members keep the batch (one process, one loop, one rollout storage, per-seed
folders, the batch report) and runs each member's own `act`, `value` and `update`, with that
seed's random state swapped into the process-wide generators while it draws. Each seed then
computes exactly what its single run computes; what it does not get is the batched matrix
products, so such a batch costs about what its seeds cost in turn, less their start-ups.
"""

from __future__ import annotations

from typing import Any

import torch

from rltrain.errors import UserError
from rltrain.runner.off_policy import random_actions
from rltrain.runner.on_policy import act_inputs
from rltrain.seed_batch.rng import SeedStreams
from rltrain.types import EnvSpec, Metrics, RolloutBatch, TransitionBatch


def _check_obs(spec: EnvSpec) -> None:
    """The batch stacks and stores observations as one tensor: Dict / Tuple ones are refused."""
    if spec.obs_entries:
        raise UserError("num_seeds > 1 cannot batch Dict or Tuple observations yet; use "
                        "num_seeds=1, or seeds_per_trial=N to train the seeds in turn")


class OnPolicyMembers:
    """`act`, `value` and `update` for S on-policy members, one member at a time
    (inputs `[S, N, ...]`); `recurrent`: the members keep memory (they take episode starts)."""

    def __init__(self, members: list[Any], streams: SeedStreams, spec: EnvSpec):
        _check_obs(spec)
        self.members, self.streams = members, streams
        self.recurrent = bool(getattr(members[0], "recurrent", False))

    def act(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
            starts: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value), each `[S, N, ...]`: seed k's member acts on `obs[k]`
        (`mask[k]`, `starts[k]` when given) with its own random state."""
        out = []
        for k, algo in enumerate(self.members):
            inputs = act_inputs(None if mask is None else mask[k],
                                None if starts is None else starts[k])
            with self.streams.as_global(k):
                out.append(algo.act(obs[k], **inputs))
        action, log_prob, value = (torch.stack(column) for column in zip(*out, strict=True))
        return action, log_prob, value

    @torch.no_grad()
    def value(self, obs: torch.Tensor, starts: torch.Tensor | None = None) -> torch.Tensor:
        """V `[S, N]`; with memory, from each member's state after its last step (`starts[k]`:
        the rows whose state is zeroed first), as its single run asks."""
        return torch.stack([algo.value(obs[k]) if starts is None
                            else algo.value(obs[k], episode_starts=starts[k])
                            for k, algo in enumerate(self.members)])

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> list[Metrics]:
        """Each member's update on its own rollout (`batch` fields `[S, T*N, ...]`), drawing
        its minibatch order from its own stream; one metrics dict per seed."""
        metrics = []
        for k, algo in enumerate(self.members):
            own = RolloutBatch(*(None if x is None else x[k] for x in batch))
            with self.streams.as_global(k):
                metrics.append(algo.update(own, progress_remaining=progress_remaining))
        return metrics


class OffPolicyMembers:
    """`random_actions`, `act` and `update` for S off-policy members, one member at a
    time (inputs `[S, N, ...]`; each seed's minibatch is sampled from its own replay with its own
    stream by the batch loop, as its single run samples it)."""

    def __init__(self, members: list[Any], streams: SeedStreams, spec: EnvSpec):
        _check_obs(spec)
        self.members, self.streams, self.spec = members, streams, spec

    def random_actions(self, num_envs: int, masks: torch.Tensor | None = None) -> torch.Tensor:
        """Each seed's uniform warm-up actions `[S, N, ...]`, drawn as its single run draws them."""
        out = []
        for k in range(len(self.members)):
            with self.streams.as_global(k):
                out.append(random_actions(self.spec, self.streams.device,
                                          None if masks is None else masks[k]))
        return torch.stack(out)

    def act(self, obs: torch.Tensor, global_step: int,
            masks: torch.Tensor | None = None) -> torch.Tensor:
        """Seed k's member acts on `obs[k]` (with `masks[k]`: DQN's valid actions)."""
        out = []
        for k, algo in enumerate(self.members):
            extra = {} if masks is None else {"action_mask": masks[k]}
            with self.streams.as_global(k):
                out.append(algo.act(obs[k], global_step, **extra))
        return torch.stack(out)

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """Each member's gradient step on its own minibatch (`batch` fields `[S, B, ...]`)."""
        metrics = []
        for k, algo in enumerate(self.members):
            own = TransitionBatch(*(None if x is None else x[k] for x in batch))
            with self.streams.as_global(k):
                metrics.append(algo.update(own, global_step))
        return metrics
