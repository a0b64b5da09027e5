"""A2C over a batch of seeds: `algos/a2c.py`'s loss (`a2c_loss`) and one full-rollout gradient
step, per seed, at once.

Same members and acting as PPO's batch (`SeedActorCritic`); the optimizer is the members' own
kind (A2C's RMSprop by default, or Adam), per seed.
"""

from __future__ import annotations

import math

import torch

from rltrain.algos.a2c import a2c_loss
from rltrain.algos.base import explained_variance, grad_norm_step, normalized, on_policy_lr, set_lr
from rltrain.seeds.actor_critic import SeedActorCritic
from rltrain.types import Metrics, RolloutBatch

_METRICS = ("train/policy_loss", "train/value_loss", "train/entropy_loss", "train/grad_norm",
            "train/loss")


class SeedA2C(SeedActorCritic):
    """A2C's `update` for S members at once (`batch` fields `[S, B, ...]`)."""

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> list[Metrics]:
        """−E[A log π] + c_v (R − V)² − c_e H per seed, one clipped step each."""
        cfg = self.cfg
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        adv = batch.advantages
        if cfg.normalize_advantage:  # each seed's own moments
            adv = normalized(adv)
        dist, values = self.net.dist_value(batch.obs, batch.action_masks)
        loss, (policy_loss, value_loss, entropy) = a2c_loss(
            dist.log_prob(batch.actions), adv, values, batch.returns, dist.entropy(), cfg)  # [S]
        self.optimizer.zero_grad()
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norms = grad_norm_step(self.optimizer, self.params, cfg.max_grad_norm)
        rows = torch.stack([policy_loss, value_loss, -entropy, norms, loss], 1).detach().tolist()
        stds = self.stds()
        out = []
        for k, row in enumerate(rows):
            metrics = dict(zip(_METRICS, row, strict=True))
            metrics["train/learning_rate"] = lr
            ev = explained_variance(batch.values[k], batch.returns[k])
            if math.isfinite(ev):  # as A2C: a nan explained variance is omitted
                metrics["train/explained_variance"] = ev
            if stds is not None:
                metrics["train/std"] = stds[k]
            out.append(metrics)
        return out
