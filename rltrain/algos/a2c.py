"""Advantage Actor-Critic (Mnih et al. 2016, synchronous variant): one gradient step per rollout."""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain.algos.base import (
    ActorCriticSeeds,
    actor_critic_state,
    by_seed,
    explained_variance,
    grad_norm_step,
    load_actor_critic_state,
    make_actor_critic,
    make_noise_clock,
    normalized,
    on_policy_lr,
    policy_stds,
    sample_rollout_step,
    set_lr,
)
from rltrain.algos.configs.a2c import OPTIMIZERS, A2CConfig
from rltrain.algos.draws import Draws
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


class A2C(ActorCriticSeeds):
    """A2C: owns the shared actor-critic network and one optimizer; `update` takes a `RolloutBatch`.

    `A2C.stack(members, streams)` is the same algorithm for a batch of seeds (`ActorCriticSeeds`):
    `act`, `value` and `update` take inputs with a leading seed dimension, each seed one step
    of its own optimizer (RMSprop or Adam, as its members') on its own rollout."""

    def __init__(self, cfg: A2CConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        self.policy = make_actor_critic(cfg, spec).to(self.device)
        self.noise_clock = make_noise_clock(cfg)  # gSDE only: new noise at each rollout start
        self.params = list(self.policy.parameters())
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)
        self.optimizer = make_optimizer(cfg, self.params)
        self.draws: Any = Draws(self.device)  # a seed batch's: each seed's stream

    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (action, log_prob, value) for a rollout step (`action_mask`: valid actions)."""
        return sample_rollout_step(self.policy, obs, self.noise_clock, action_mask, self.draws)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), detached."""
        return self.policy.value(obs)

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Any:
        """One gradient step on the whole rollout: −E[A log π] + c_v (R − V)² − c_e H (a seed
        batch, fields `[S, B, ...]`: one step per seed, one metrics dict per seed)."""
        cfg = self.cfg
        if self.noise_clock is not None:  # the next rollout starts with new gSDE noise
            self.noise_clock.restart()
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        adv = batch.advantages
        if cfg.normalize_advantage:  # over every rank's rollout (a seed batch: per seed)
            adv = normalized(adv, self.collective.moments(adv))
        dist, values = self.policy.dist_value(batch.obs, batch.action_masks)
        loss, (policy_loss, value_loss, entropy) = a2c_loss(
            self.policy.head.log_prob(dist, batch.actions), adv, values, batch.returns,
            self.policy.head.entropy(dist), cfg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norm = grad_norm_step(self.optimizer, self.params, cfg.max_grad_norm,
                              self.collective.average_)
        parts = torch.stack([policy_loss, value_loss, -entropy, norm.to(loss.dtype), loss], -1)
        out = [self._metrics(row, lr, seed_values, seed_returns)
               for row, seed_values, seed_returns in zip(
                   by_seed(parts.detach()).tolist(), by_seed(batch.values),
                   by_seed(batch.returns), strict=True)]
        if self.spec.action_kind == "box":
            for metrics, std in zip(out, policy_stds(self.policy), strict=True):
                metrics["train/std"] = std
        return out if parts.dim() > 1 else out[0]

    @staticmethod
    def _metrics(row: list[float], lr: float, values: torch.Tensor,
                 returns: torch.Tensor) -> Metrics:
        """One seed's metrics from its `[policy loss, value loss, −entropy, grad norm, loss]`."""
        policy_loss, value_loss, entropy_loss, norm, loss = row
        metrics = {"train/policy_loss": policy_loss, "train/value_loss": value_loss,
                   "train/entropy_loss": entropy_loss, "train/learning_rate": lr,
                   "train/grad_norm": norm, "train/loss": loss}
        ev = explained_variance(values, returns)
        if math.isfinite(ev):  # nan when all returns are equal (V at its fixed point): omit it,
            metrics["train/explained_variance"] = ev  # the runner's guard stops on nan train/*
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
    last dimension (a rollout `[B]`: scalars; a seed batch's `[S, B]`, `A2C.stack`: per seed)."""
    policy_loss = -(adv * log_prob).mean(-1)
    value_loss = (returns - values).pow(2).mean(-1)
    entropy = entropy.mean(-1)
    return policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy, (
        policy_loss, value_loss, entropy)


def build(cfg: A2CConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> A2C:
    """Registry builder."""
    return A2C(cfg, spec, device)


def stack(members: list[A2C], streams: Any) -> A2C:
    """A seed batch's A2C (`seed_batch/batch.py` looks for this beside `build`)."""
    return A2C.stack(members, streams)
