"""What PPO and A2C share over a batch of seeds: the stacked actor-critic, acting with each
seed's own noise, V, the per-seed optimizer and the copy back into each seed's member."""

from __future__ import annotations

from typing import Any

import torch

from rltrain.algos.optim import stacked_optimizer
from rltrain.nets import seeded
from rltrain.nets.heads import GaussianHead
from rltrain.nets.seeded import NotStackable, stack_modules
from rltrain.seeds.rng import SeedStreams


class SeedActorCritic:
    """`act` and `value` for S actor-critic members at once (inputs `[S, N, ...]`), and `sync`."""

    def __init__(self, members: list[Any], streams: SeedStreams):
        for algo in members:
            if getattr(algo, "recurrent", False):
                raise NotStackable("a recurrent core (algo.recurrent)")
            if algo.noise_clock is not None:
                raise NotStackable("gSDE (algo.use_sde)")
        self.members, self.streams = members, streams
        self.cfg = members[0].cfg
        self.net = stack_modules([m.policy for m in members])
        self.gaussian = isinstance(self.net.head, GaussianHead)
        self.params = list(self.net.parameters())
        self.optimizer = stacked_optimizer(self.params, [m.optimizer for m in members])

    @torch.no_grad()
    def act(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value), each `[S, N, ...]`; seed k's sampling noise comes from
        seed k's generator, shaped as its single-seed run draws it; `mask` `[S, N, n]`: the
        valid actions (a masked env), the only ones sampled."""
        dist, value = self.net.dist_value(obs, mask)
        like = dist.mean if self.gaussian else dist.log_probs
        action = dist.sample(self.streams.draw(dist.noise, like.shape[1:]))
        return action, dist.log_prob(action), value

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) `[S, N]`."""
        return self.net.value(obs)

    def stds(self) -> list[float] | None:
        """Each seed's mean σ (as `policy_std`: of the unclamped log σ); None for choices."""
        if not self.gaussian:
            return None
        return self.net.head.log_std.detach().exp().mean(-1).tolist()

    def sync(self) -> None:
        """Copy each seed's parameters and optimizer state into its member (what its
        evaluation and checkpoints read)."""
        for k, algo in enumerate(self.members):
            seeded.copy_to(self.net, k, algo.policy)
            self.optimizer.copy_to(k, algo.optimizer)
