"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016), for Box action spaces."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.base import decay_lrs, pick_lr
from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.off_policy_steps import (
    critic_step,
    deterministic_actor_step,
    polyak_update,
    td_target,
)
from rltrain.algos.optim import adam
from rltrain.nets.continuous import DeterministicActor, QEnsemble, add_gaussian_noise
from rltrain.nets.spec import resolve_nets
from rltrain.types import EnvSpec, Metrics, TransitionBatch


class DDPG:
    """Deterministic actor, one critic, and their Polyak-averaged targets."""

    def __init__(self, cfg: DDPGConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        actor, critic = resolve_nets(cfg, spec)
        self.actor = DeterministicActor(actor, spec.action_dim).to(self.device)
        self.critic = QEnsemble(critic, spec.action_dim, n=1).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.start_lrs = {"actor_optimizer": pick_lr(cfg.actor_lr, cfg),
                          "critic_optimizer": pick_lr(cfg.critic_lr, cfg)}
        self.actor_optimizer = adam(self.actor.parameters(), self.start_lrs["actor_optimizer"])
        self.critic_optimizer = adam(self.critic.parameters(), self.start_lrs["critic_optimizer"])
        self.policy = self.actor
        self._actor_params = list(self.actor.parameters())

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        """Actor action plus clipped Gaussian exploration noise, in [-1, 1]."""
        return add_gaussian_noise(self.actor(obs), self.cfg.action_noise)

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics:
        """One critic step, one actor step, then a soft update of both targets."""
        rates = decay_lrs(self, global_step)
        metrics = self._critic_step(batch)
        metrics["train/actor_loss"] = self._actor_step(batch.obs)
        polyak_update(self.critic_target, self.critic, self.cfg.tau)
        polyak_update(self.actor_target, self.actor, self.cfg.tau)
        return {**metrics, **rates}

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) Q'(s', μ'(s')), shape [B]."""
        return ddpg_target(self.critic_target, self.actor_target, batch, self.cfg.gamma)

    def _critic_step(self, batch: TransitionBatch) -> dict[str, float]:
        losses, q = critic_step(self.critic, self.critic_optimizer, batch, self.target(batch))
        loss = losses[0].item()
        return {"train/critic1_loss": loss, "train/q_loss": loss, "train/mean_q": q.mean().item()}

    def _actor_step(self, obs: torch.Tensor) -> float:
        return deterministic_actor_step(self.actor, self.critic, self.actor_optimizer, obs,
                                        self._actor_params).item()

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets and optimizers as plain tensors."""
        return {name: getattr(self, name).state_dict() for name in _STATE}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        for name in _STATE:
            getattr(self, name).load_state_dict(state[name])


_STATE = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer",
          "critic_optimizer")


@torch.no_grad()
def ddpg_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
                actor_target: Callable[[Any], torch.Tensor], batch: TransitionBatch,
                gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) Q'(s', μ'(s')) (the one critic of the ensemble; a seed
    batch's stacked networks run it too, `seeds/deterministic.py`)."""
    next_q = critic_target(batch.next_obs, actor_target(batch.next_obs)).select(-2, 0)
    return td_target(batch.rewards, next_q, batch.terminated, gamma)


def build(cfg: DDPGConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> DDPG:
    """Registry builder."""
    return DDPG(cfg, spec, device)
