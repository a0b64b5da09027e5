"""Twin Delayed DDPG (Fujimoto et al. 2018), for Box action spaces."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.base import decay_lrs, pick_lr
from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.off_policy_steps import (
    deterministic_actor_step,
    polyak_update,
    td_target,
    twin_critic_step,
)
from rltrain.algos.optim import adam
from rltrain.nets.continuous import DeterministicActor, TwinQ, add_gaussian_noise
from rltrain.nets.spec import resolve_nets
from rltrain.types import EnvSpec, Metrics, TransitionBatch


class TD3:
    """Deterministic actor, twin critics (clipped double-Q), delayed actor and target updates."""

    def __init__(self, cfg: TD3Config, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        actor, critic = resolve_nets(cfg, spec)
        self.actor = DeterministicActor(actor, spec.action_dim).to(self.device)
        self.critic = TwinQ(critic, spec.action_dim).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.start_lrs = {"actor_optimizer": pick_lr(cfg.actor_lr, cfg),
                          "critic_optimizer": pick_lr(cfg.critic_lr, cfg)}
        self.actor_optimizer = adam(self.actor.parameters(), self.start_lrs["actor_optimizer"])
        self.critic_optimizer = adam(self.critic.parameters(), self.start_lrs["critic_optimizer"])
        self.policy = self.actor
        self._actor_params = list(self.actor.parameters())
        self.n_updates = 0  # critic updates so far; the actor updates when it is 0 mod policy_delay
        self._actor_loss = 0.0

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        """Actor action plus clipped Gaussian exploration noise, in [-1, 1]."""
        return add_gaussian_noise(self.actor(obs), self.cfg.action_noise)

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics:
        """One critic step; every `policy_delay`-th call also an actor step and target updates.

        `train/actor_loss` repeats the latest actor loss on steps that skip the actor.
        """
        rates = decay_lrs(self, global_step)
        metrics = self._critic_step(batch)
        if self.n_updates % self.cfg.policy_delay == 0:
            self._actor_loss = self._actor_step(batch.obs)
            polyak_update(self.critic_target, self.critic, self.cfg.tau)
            polyak_update(self.actor_target, self.actor, self.cfg.tau)
        self.n_updates += 1
        metrics["train/actor_loss"] = self._actor_loss
        return {**metrics, **rates}

    @torch.no_grad()
    def target_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """Target policy smoothing: μ'(s') + clip(N(0, σ²), −c, c), clipped to [-1, 1]."""
        action = self.actor_target(next_obs)
        return smoothed(action, torch.randn_like(action), self.cfg)

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) min_i Q'_i(s', ã'), shape [B]."""
        return td3_target(self.critic_target, batch, self.target_action(batch.next_obs),
                          self.cfg.gamma)

    def _critic_step(self, batch: TransitionBatch) -> dict[str, float]:
        return twin_critic_step(self.critic, self.critic_optimizer, batch, self.target(batch))

    def _actor_step(self, obs: torch.Tensor) -> float:
        return deterministic_actor_step(self.actor, self.critic, self.actor_optimizer, obs,
                                        self._actor_params).item()

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, optimizers and the update counter as plain data."""
        state: dict[str, Any] = {name: getattr(self, name).state_dict() for name in _STATE}
        state["n_updates"] = self.n_updates
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        for name in _STATE:
            getattr(self, name).load_state_dict(state[name])
        self.n_updates = int(state["n_updates"])


_STATE = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer",
          "critic_optimizer")


# ---- TD3's math, written once (a seed batch's stacked networks run it too, `seeds/
# deterministic.py`; the critics' ensemble is the dimension before the rows) ------------------

def smoothed(action: torch.Tensor, normal: torch.Tensor, cfg: TD3Config) -> torch.Tensor:
    """Target policy smoothing of `action` with the standard normal draw `normal`:
    action + clip(σ normal, −c, c), clipped to [-1, 1]."""
    noise = (normal * cfg.target_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
    return (action + noise).clamp(-1.0, 1.0)


@torch.no_grad()
def td3_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
               batch: TransitionBatch, next_action: torch.Tensor, gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) min_i Q'_i(s', ã') (clipped double-Q)."""
    next_q = critic_target(batch.next_obs, next_action).min(-2).values
    return td_target(batch.rewards, next_q, batch.terminated, gamma)


def build(cfg: TD3Config, spec: EnvSpec, device: torch.device | str = "cpu") -> TD3:
    """Registry builder."""
    return TD3(cfg, spec, device)
