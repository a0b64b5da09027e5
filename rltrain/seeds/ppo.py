"""PPO over a batch of seeds: the math of `algos/ppo.py`, with a leading seed dimension.

The members are ordinary `PPO` objects, one per seed (as each seed's Runner built it). Their
parameters are trained stacked (`SeedActorCritic`: `StackedActorCritic`, `SeedAdam`) with
per-seed gradient clipping, Adam step counts, KL early stopping and metrics; `sync` copies each
seed's parameters and optimizer state back into its member when its evaluation or checkpoint
reads them.
"""

from __future__ import annotations

import torch

from rltrain.algos.base import explained_variance, on_policy_lr
from rltrain.algos.ppo import _METRICS
from rltrain.seeds.actor_critic import SeedActorCritic
from rltrain.seeds.optim import clip_per_seed
from rltrain.types import Metrics, RolloutBatch

_KL = _METRICS.index("train/approx_kl")


class SeedPPO(SeedActorCritic):
    """PPO's `update` for S members at once."""

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> list[Metrics]:
        """Minibatch epochs over each seed's rollout (`batch` fields `[S, B, ...]`); one
        metrics dict per seed, as that seed's `PPO.update` would return it."""
        cfg, seeds = self.cfg, len(self.members)
        self.optimizer.lr = lr = on_policy_lr(cfg, progress_remaining)
        size = batch.advantages.shape[1]
        active = [True] * seeds  # a seed whose KL stopped its epochs sits out the rest
        rows: list[torch.Tensor] = []  # [S, len(_METRICS)] per minibatch step
        took: list[list[bool]] = []  # which seeds took each step
        for _ in range(cfg.n_epochs):
            perm = self.streams.randperm(size, active)
            epoch = [self._minibatch_step(batch, perm[:, i:i + cfg.batch_size], active)
                     for i in range(0, size, cfg.batch_size)]
            rows += epoch
            took += [list(active)] * len(epoch)
            if cfg.target_kl is not None:  # one host sync per epoch, only when early stopping
                kl = torch.stack(epoch)[:, :, _KL].mean(0).tolist()
                active = [on and k <= 1.5 * cfg.target_kl for on, k in zip(active, kl, strict=True)]
                if not any(active):
                    break
        stacked = torch.stack(rows)
        return self._metrics(batch, stacked, torch.tensor(took, device=stacked.device), lr)

    def _minibatch_step(self, batch: RolloutBatch, idx: torch.Tensor,
                        active: list[bool]) -> torch.Tensor:
        """One gradient step of every active seed on its rows `idx[k]`; `[S, len(_METRICS)]`."""
        cfg = self.cfg
        seed_rows = torch.arange(idx.shape[0], device=idx.device).unsqueeze(1)
        obs, actions = batch.obs[seed_rows, idx], batch.actions[seed_rows, idx]
        old_log_prob, old_values = batch.log_probs[seed_rows, idx], batch.values[seed_rows, idx]
        adv, returns = batch.advantages[seed_rows, idx], batch.returns[seed_rows, idx]
        if cfg.normalize_advantage and adv.shape[1] > 1:
            adv = (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-8)
        masks = None if batch.action_masks is None else batch.action_masks[seed_rows, idx]
        dist, values = self.net.dist_value(obs, masks)  # masked: loss and entropy over valid ones
        log_ratio = dist.log_prob(actions) - old_log_prob
        ratio = log_ratio.exp()
        eps = cfg.clip_range
        surrogate = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        policy_loss = -surrogate.mean(-1)
        clip_frac = ((ratio - 1).abs() > eps).float().mean(-1)
        value_loss = _value_loss(values, old_values, returns, cfg.clip_range_vf)
        entropy = dist.entropy().mean(-1)
        loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy  # [S]
        self.optimizer.zero_grad()
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norms = clip_per_seed(self.params, cfg.max_grad_norm)
        self.optimizer.step(active)
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean(-1)
            return torch.stack([policy_loss, value_loss, -entropy, approx_kl, clip_frac, norms,
                                loss], dim=1).detach()

    def _metrics(self, batch: RolloutBatch, rows: torch.Tensor, took: torch.Tensor,
                 lr: float) -> list[Metrics]:
        """Each seed's means over the steps it took (`rows` [steps, S, M], `took` [steps, S])."""
        weights = took.to(rows.dtype).unsqueeze(-1)
        means = ((rows * weights).sum(0) / weights.sum(0)).tolist()  # one host sync
        counts = took.sum(0).tolist()
        stds = self.stds()
        out = []
        for k in range(len(self.members)):
            metrics = dict(zip(_METRICS, means[k], strict=True))
            metrics["train/explained_variance"] = explained_variance(batch.values[k], batch.returns[k])
            metrics["train/learning_rate"] = lr
            metrics["train/n_updates"] = float(counts[k])
            if stds is not None:
                metrics["train/std"] = stds[k]
            out.append(metrics)
        return out


def _value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
                clip: float | None) -> torch.Tensor:
    """Per seed `[S]`: squared error to the returns, optionally clipped around the old values."""
    if clip is None:
        return (returns - values).pow(2).mean(-1)
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return torch.max((returns - values).pow(2), (returns - clipped).pow(2)).mean(-1)
