"""SAC over a batch of seeds: `algos/sac.py`'s target, critic step and actor/α step
(`sac_target`, `critic_step`, `entropy_actor_step`) over stacked networks.

The members are ordinary `SAC` objects. Actor, twin critics and their targets are trained
stacked (`StackedActor`, `StackedEnsembleQ`), with one `SeedAdam` each for the actor, the
critics and log α; the actor's reparameterization noise, warm-up actions and replay samples come
from each seed's own stream, in the order its single run draws them (replay indices, the next
action's noise, then the actor step's). `sync` copies everything back into each member.
"""

from __future__ import annotations

import torch

from rltrain.algos.base import decay_lrs
from rltrain.algos.off_policy_steps import critic_step, entropy_actor_step, polyak_update
from rltrain.algos.optim import stacked_optimizer
from rltrain.algos.sac import SAC, sac_target
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.seeded import stack_modules
from rltrain.seeds.rng import SeedStreams
from rltrain.types import Metrics, TransitionBatch


class SeedSAC:
    """`act`, `random_actions` and `update` for S SAC members at once (inputs `[S, ...]`)."""

    def __init__(self, members: list[SAC], streams: SeedStreams):
        if not all(isinstance(m, SAC) for m in members):
            raise UserError("a SAC seed batch needs SAC members")
        if members[0].noise_clock is not None:
            raise UserError("num_seeds > 1 does not batch gSDE (algo.use_sde) yet; use num_seeds=1")
        self.members, self.streams = members, streams
        self.cfg, self.action_dim = members[0].cfg, members[0].spec.action_dim
        self.actor = stack_modules([m.actor for m in members])
        self.critic = stack_modules([m.critic for m in members])
        self.critic_target = stack_modules([m.critic_target for m in members], requires_grad=False)
        self.log_alpha = torch.stack([m.log_alpha.detach() for m in members]).requires_grad_(
            self.cfg.autotune_alpha)
        self.actor_optimizer = stacked_optimizer(list(self.actor.parameters()),
                                                 [m.actor_optimizer for m in members])
        self.critic_optimizer = stacked_optimizer(list(self.critic.parameters()),
                                                  [m.critic_optimizer for m in members])
        self.alpha_optimizer = stacked_optimizer([self.log_alpha],
                                                 [m.alpha_optimizer for m in members])
        self.target_entropy = members[0].target_entropy
        self.start_lrs = members[0].start_lrs
        self.n_updates = members[0].n_updates
        self._actor_rows: list[list[float]] = [[float("nan")] * 2 for _ in members]

    def _noise(self, rows: int) -> torch.Tensor:
        """`[S, rows, A]` standard normal draws, each seed's from its own stream."""
        return self.streams.draw("normal", (rows, self.action_dim))

    def random_actions(self, num_envs: int) -> torch.Tensor:
        """Uniform actions in [-1, 1] `[S, N, A]` before learning starts, per seed's stream."""
        return self.streams.draw("uniform", (num_envs, self.action_dim)) * 2.0 - 1.0

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        """A sample of each seed's squashed-Gaussian policy `[S, N, A]`."""
        return self.actor(obs, noise=self._noise(obs.shape[1]))[0]

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """Critic step; actor and α steps every `policy_delay`-th call; then the soft target
        update. One metrics dict per seed, as `SAC.update` returns it."""
        rates = decay_lrs(self, global_step)
        with torch.no_grad():
            next_sample = self.actor(batch.next_obs, noise=self._noise(batch.rewards.shape[1]))
        y = sac_target(self.critic_target, batch, *next_sample, self.log_alpha.detach().exp(),
                       self.cfg.gamma)
        losses, q = critic_step(self.critic, self.critic_optimizer, batch, y)  # [S, 2], [S, 2, B]
        if self.n_updates % self.cfg.policy_delay == 0:
            loss_entropy = entropy_actor_step(
                lambda obs: self.actor(obs, noise=self._noise(obs.shape[1])), self.critic,
                self.actor_optimizer, batch.obs, list(self.actor.parameters()), self.log_alpha,
                self.alpha_optimizer if self.cfg.autotune_alpha else None, self.target_entropy)
            self._actor_rows = torch.stack(loss_entropy, 1).tolist()
        polyak_update(self.critic_target, self.critic, self.cfg.tau)
        self.n_updates += 1
        rows = torch.cat([losses, q.mean((1, 2)).unsqueeze(1),
                          self.log_alpha.detach().exp().unsqueeze(1)], 1).tolist()
        return [{"train/critic1_loss": r[0], "train/critic2_loss": r[1],
                 "train/q_loss": (r[0] + r[1]) / 2, "train/mean_q": r[2],
                 "train/actor_loss": a[0], "train/entropy": a[1], "train/alpha": r[3], **rates}
                for r, a in zip(rows, self._actor_rows, strict=True)]

    def sync(self) -> None:
        """Copy each seed's networks, optimizers, log α and update count into its member."""
        for k, algo in enumerate(self.members):
            seeded.copy_to(self.actor, k, algo.actor)
            seeded.copy_to(self.critic, k, algo.critic)
            seeded.copy_to(self.critic_target, k, algo.critic_target)
            self.actor_optimizer.copy_to(k, algo.actor_optimizer)
            self.critic_optimizer.copy_to(k, algo.critic_optimizer)
            self.alpha_optimizer.copy_to(k, algo.alpha_optimizer)
            with torch.no_grad():
                algo.log_alpha.copy_(self.log_alpha[k])
            algo.n_updates = self.n_updates
