"""Advantage Actor-Critic (Mnih et al. 2016, synchronous variant): one gradient step per rollout."""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain.algos.base import (
    actor_critic_state,
    explained_variance,
    grad_norm_step,
    load_actor_critic_state,
    make_actor_critic,
    make_noise_clock,
    normalized,
    on_policy_lr,
    policy_std,
    sample_rollout_step,
    set_lr,
)
from rltrain.algos.configs.a2c import OPTIMIZERS, A2CConfig
from rltrain.algos.optim import Optimizer, RMSprop, adam
from rltrain.errors import UserError
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, Metrics, RolloutBatch


def make_optimizer(cfg: A2CConfig, params: list[torch.Tensor]) -> Optimizer:
    """The optimizer named by `cfg.optimizer` (rltrain's own: see `rltrain/algos/optim.py`)."""
    if cfg.optimizer == "rmsprop":
        return RMSprop(params, cfg.lr, alpha=cfg.rmsprop_alpha, eps=cfg.optimizer_eps)
    if cfg.optimizer == "adam":
        return adam(params, cfg.lr, eps=cfg.optimizer_eps)
    raise UserError(f"algo.optimizer={cfg.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")


class A2C:
    """A2C: owns the shared actor-critic network and one optimizer; `update` takes a `RolloutBatch`."""

    def __init__(self, cfg: A2CConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        self.policy = make_actor_critic(cfg, spec).to(self.device)
        self.noise_clock = make_noise_clock(cfg)  # gSDE only: new noise at each rollout start
        self._params = list(self.policy.parameters())
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)
        self.optimizer = make_optimizer(cfg, self._params)

    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (action, log_prob, value) for a rollout step (`action_mask`: valid actions)."""
        return sample_rollout_step(self.policy, obs, self.noise_clock, action_mask)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), detached."""
        return self.policy.value(obs)

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Metrics:
        """One gradient step on the whole rollout: −E[A log π] + c_v (R − V)² − c_e H."""
        cfg = self.cfg
        if self.noise_clock is not None:  # the next rollout starts with new gSDE noise
            self.noise_clock.restart()
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        adv = batch.advantages
        if cfg.normalize_advantage:  # over every rank's rollout
            adv = normalized(adv, self.collective.moments(adv))
        dist, values = self.policy.dist_value(batch.obs, batch.action_masks)
        loss, (policy_loss, value_loss, entropy) = a2c_loss(
            self.policy.head.log_prob(dist, batch.actions), adv, values, batch.returns,
            self.policy.head.entropy(dist), cfg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = grad_norm_step(self.optimizer, self._params, cfg.max_grad_norm,
                              self.collective.average_)
        metrics = {
            "train/policy_loss": policy_loss.item(),
            "train/value_loss": value_loss.item(),
            "train/entropy_loss": -entropy.item(),
            "train/learning_rate": lr,
            "train/grad_norm": norm.item(),
            "train/loss": loss.item(),
        }
        ev = explained_variance(batch.values, batch.returns)
        if math.isfinite(ev):  # nan when all returns are equal (V at its fixed point): omit it,
            metrics["train/explained_variance"] = ev  # the runner's guard stops on nan train/*
        if self.spec.action_kind == "box":
            metrics["train/std"] = policy_std(self.policy)
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Network, optimizer (and the held gSDE noise) as plain data."""
        return actor_critic_state(self.policy, self.optimizer, self.noise_clock)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        load_actor_critic_state(self.policy, self.optimizer, self.noise_clock, state)


def a2c_loss(log_prob: torch.Tensor, adv: torch.Tensor, values: torch.Tensor,
             returns: torch.Tensor, entropy: torch.Tensor, cfg: A2CConfig,
             ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(loss, (policy loss, value loss, entropy)): −E[A log π] + c_v (R − V)² − c_e H, over the
    last dimension (a rollout `[B]`: scalars; a seed batch's `[S, B]`, `seeds/a2c.py`: per seed)."""
    policy_loss = -(adv * log_prob).mean(-1)
    value_loss = (returns - values).pow(2).mean(-1)
    entropy = entropy.mean(-1)
    return policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy, (
        policy_loss, value_loss, entropy)


def build(cfg: A2CConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> A2C:
    """Registry builder."""
    return A2C(cfg, spec, device)
