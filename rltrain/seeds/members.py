"""On-policy seeds whose networks cannot run stacked: each seed's own PPO or A2C, in turn.

`stacked.py` batches MLP actor-critics on vector observations. A recurrent core (`ppo_lstm`),
gSDE, an image or shared encoder, or a MultiDiscrete / MultiBinary head it cannot stack; for
those, `SeedMembers` keeps the batch (one process, one loop, one rollout storage, per-seed
folders, the batch report) and runs each member's own `act`, `value` and `update`, with that
seed's random state swapped into the process-wide generators while it draws. Each seed then
computes exactly what its single run computes; what it does not get is the batched matrix
products, so such a batch costs about what its seeds cost in turn, less their start-ups.
"""

from __future__ import annotations

from typing import Any

import torch

from rltrain.errors import UserError
from rltrain.runner.on_policy import act_inputs
from rltrain.seeds.rng import SeedStreams
from rltrain.types import Metrics, RolloutBatch


class SeedMembers:
    """`act`, `value`, `update` and `sync` for S on-policy members, one member at a time
    (inputs `[S, N, ...]`); `recurrent`: the members keep memory (they take episode starts)."""

    def __init__(self, members: list[Any], streams: SeedStreams):
        if members[0].spec.obs_entries:  # the batch stacks and stores observations as one tensor
            raise UserError("num_seeds > 1 cannot batch Dict or Tuple observations yet; use "
                            "num_seeds=1, or seeds_per_trial=N to train the seeds in turn")
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

    def sync(self) -> None:
        """Nothing to copy: the members train their own networks."""
