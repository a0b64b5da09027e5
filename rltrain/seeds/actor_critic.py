"""What PPO and A2C share over a batch of seeds: the stacked actor-critic, acting with each
seed's own noise, V, the per-seed optimizer and the copy back into each seed's member."""

from __future__ import annotations

from typing import Any

import torch

from rltrain.algos.optim import FusedAdam, RMSprop
from rltrain.errors import UserError
from rltrain.seeds.optim import SeedAdam, SeedRMSprop
from rltrain.seeds.rng import SeedStreams
from rltrain.seeds.stacked import NotStackable, StackedActorCritic


def _optimizer(params: list[torch.Tensor], optimizers: list[Any]) -> SeedAdam | SeedRMSprop:
    """The per-seed form of the members' optimizer (Adam, or A2C's RMSprop)."""
    kind = type(getattr(optimizers[0], "built", optimizers[0]))
    if kind is FusedAdam or kind is torch.optim.Adam:
        return SeedAdam(params, optimizers)
    if kind is RMSprop or kind is torch.optim.RMSprop:
        return SeedRMSprop(params, optimizers)
    raise UserError(f"num_seeds > 1 cannot batch a {kind.__name__} optimizer; use num_seeds=1")


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
        self.net = StackedActorCritic([m.policy for m in members])
        self.params = self.net.parameters()
        self.optimizer = _optimizer(self.params, [m.optimizer for m in members])

    @torch.no_grad()
    def act(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value), each `[S, N, ...]`; seed k's sampling noise comes from
        seed k's generator, shaped as its single-seed run draws it; `mask` `[S, N, n]`: the
        valid actions (a masked env), the only ones sampled."""
        dist, value = self.net.dist_value(obs, mask)
        like = dist.mean if self.net.gaussian else dist.log_probs
        action = dist.sample(self.streams.draw(dist.noise, like.shape[1:]))
        return action, dist.log_prob(action), value

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) `[S, N]`."""
        return self.net.value(obs)

    def stds(self) -> list[float] | None:
        """Each seed's mean σ (as `policy_std`: of the unclamped log σ); None for choices."""
        if not self.net.gaussian:
            return None
        return self.net.params["head.log_std"].detach().exp().mean(-1).tolist()

    def sync(self) -> None:
        """Copy each seed's parameters and optimizer state into its member (what its
        evaluation and checkpoints read)."""
        for k, algo in enumerate(self.members):
            self.net.copy_to(k, algo.policy)
            self.optimizer.copy_to(k, algo.optimizer)
