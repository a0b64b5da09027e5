"""DDPG and TD3 over a batch of seeds: the targets, critic step and actor step of
`algos/ddpg.py`, `algos/td3.py` and `algos/base.py` over stacked networks.

Actor, critic(s) and both targets are trained stacked; exploration noise, warm-up actions, TD3's
target-policy smoothing noise and replay samples come from each seed's own stream, in its single
run's order. DDPG is TD3 with one critic, no smoothing and no delay, and its own metrics.
"""

from __future__ import annotations

import torch

from rltrain.algos.base import decay_lrs
from rltrain.algos.ddpg import DDPG, ddpg_target
from rltrain.algos.off_policy_steps import critic_step, deterministic_actor_step, polyak_update
from rltrain.algos.optim import stacked_optimizer
from rltrain.algos.td3 import TD3, smoothed, td3_target
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.continuous import add_gaussian_noise
from rltrain.nets.seeded import stack_modules
from rltrain.seeds.rng import SeedStreams
from rltrain.types import Metrics, TransitionBatch


class SeedDeterministic:
    """What DDPG and TD3 share: acting with per-seed Gaussian noise, the actor step, `sync`."""

    kind: type = object

    def __init__(self, members: list, streams: SeedStreams):
        if not all(isinstance(m, self.kind) for m in members):
            raise UserError(f"a {self.kind.__name__} seed batch needs {self.kind.__name__} members")
        self.members, self.streams = members, streams
        self.cfg, self.action_dim = members[0].cfg, members[0].spec.action_dim
        self.actor = stack_modules([m.actor for m in members])
        self.actor_target = stack_modules([m.actor_target for m in members], requires_grad=False)
        self.critic = stack_modules([m.critic for m in members])
        self.critic_target = stack_modules([m.critic_target for m in members],
                                           requires_grad=False)
        self.actor_optimizer = stacked_optimizer(list(self.actor.parameters()),
                                                 [m.actor_optimizer for m in members])
        self.critic_optimizer = stacked_optimizer(list(self.critic.parameters()),
                                                  [m.critic_optimizer for m in members])
        self.everyone = [True] * len(members)
        self.start_lrs = members[0].start_lrs

    def random_actions(self, num_envs: int) -> torch.Tensor:
        """Uniform actions in [-1, 1] `[S, N, A]` before learning starts, per seed's stream."""
        return self.streams.draw("uniform", (num_envs, self.action_dim)) * 2.0 - 1.0

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        """Each seed's actor action plus its clipped Gaussian exploration noise, `[S, N, A]`."""
        action = self.actor(obs)
        if self.cfg.action_noise <= 0:
            return action
        return add_gaussian_noise(action, self.cfg.action_noise,
                                  self.streams.draw("normal", action.shape[1:]))

    def _actor_step(self, obs: torch.Tensor) -> torch.Tensor:
        """−Q1(s, μ(s)) per seed `[S]`; one Adam step of every actor (critics get no gradient)."""
        return deterministic_actor_step(self.actor, self.critic, self.actor_optimizer, obs,
                                        list(self.actor.parameters()))

    def _soft_update_targets(self) -> None:
        polyak_update(self.critic_target, self.critic, self.cfg.tau)
        polyak_update(self.actor_target, self.actor, self.cfg.tau)

    def sync(self) -> None:
        """Copy each seed's networks, targets and optimizers into its member."""
        for k, algo in enumerate(self.members):
            for name in ("actor", "actor_target", "critic", "critic_target"):
                seeded.copy_to(getattr(self, name), k, getattr(algo, name))
            self.actor_optimizer.copy_to(k, algo.actor_optimizer)
            self.critic_optimizer.copy_to(k, algo.critic_optimizer)


class SeedTD3(SeedDeterministic):
    """TD3's `update` for S members at once (`batch` fields `[S, B, ...]`)."""

    kind = TD3

    def __init__(self, members: list[TD3], streams: SeedStreams):
        super().__init__(members, streams)
        self.n_updates = members[0].n_updates
        self._actor_loss = [0.0] * len(members)

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """Twin-critic step; every `policy_delay`-th call the actor step and target updates."""
        cfg = self.cfg
        rates = decay_lrs(self, global_step)
        with torch.no_grad():
            next_action = self.actor_target(batch.next_obs)
            next_action = smoothed(next_action, self.streams.draw("normal", next_action.shape[1:]),
                                   cfg)
        y = td3_target(self.critic_target, batch, next_action, cfg.gamma)
        losses, q = critic_step(self.critic, self.critic_optimizer, batch, y)  # [S, 2], [S, 2, B]
        if self.n_updates % cfg.policy_delay == 0:
            self._actor_loss = self._actor_step(batch.obs).tolist()
            self._soft_update_targets()
        self.n_updates += 1
        rows = torch.cat([losses, q.mean((1, 2)).unsqueeze(1)], 1).tolist()
        return [{"train/critic1_loss": r[0], "train/critic2_loss": r[1],
                 "train/q_loss": (r[0] + r[1]) / 2, "train/mean_q": r[2], "train/actor_loss": a,
                 **rates} for r, a in zip(rows, self._actor_loss, strict=True)]

    def sync(self) -> None:
        super().sync()
        for algo in self.members:
            algo.n_updates = self.n_updates


class SeedDDPG(SeedDeterministic):
    """DDPG's `update` for S members at once (`batch` fields `[S, B, ...]`)."""

    kind = DDPG

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """One critic step, one actor step, then a soft update of both targets."""
        rates = decay_lrs(self, global_step)
        y = ddpg_target(self.critic_target, self.actor_target, batch, self.cfg.gamma)
        losses, q = critic_step(self.critic, self.critic_optimizer, batch, y)  # [S, 1], [S, 1, B]
        actor_loss = self._actor_step(batch.obs)
        self._soft_update_targets()
        rows = torch.stack([losses[:, 0], q[:, 0].mean(-1), actor_loss], 1).tolist()
        return [{"train/critic1_loss": r[0], "train/q_loss": r[0], "train/mean_q": r[1],
                 "train/actor_loss": r[2], **rates} for r in rows]
