"""PPO over a batch of seeds: `algos/ppo.py`'s loss (`ppo_loss`) and KL stop over a leading
seed dimension; what is here is about seeds (which rows each seed's minibatch takes, which
seeds sit out after their KL stop, one metrics dict per seed).

The members are ordinary `PPO` objects, one per seed (as each seed's Runner built it). Their
parameters are trained stacked (`SeedActorCritic`: `StackedActorCritic`, `SeedAdam`) with
per-seed gradient clipping, Adam step counts, KL early stopping and metrics; `sync` copies each
seed's parameters and optimizer state back into its member when its evaluation or checkpoint
reads them.
"""

from __future__ import annotations

import torch

from rltrain.algos.base import explained_variance, grad_norm_step, normalized, on_policy_lr, set_lr
from rltrain.algos.ppo import KL_INDEX, MINIBATCH_METRICS, kl_stops, ppo_loss
from rltrain.seeds.actor_critic import SeedActorCritic
from rltrain.types import Metrics, RolloutBatch


class SeedPPO(SeedActorCritic):
    """PPO's `update` for S members at once."""

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> list[Metrics]:
        """Minibatch epochs over each seed's rollout (`batch` fields `[S, B, ...]`); one
        metrics dict per seed, as that seed's `PPO.update` would return it."""
        cfg, seeds = self.cfg, len(self.members)
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        size = batch.advantages.shape[1]
        active = [True] * seeds  # a seed whose KL stopped its epochs sits out the rest
        rows: list[torch.Tensor] = []  # [S, len(MINIBATCH_METRICS)] per minibatch step
        took: list[list[bool]] = []  # which seeds took each step
        for _ in range(cfg.n_epochs):
            perm = self.streams.randperm(size, active)
            epoch = [self._minibatch_step(batch, perm[:, i:i + cfg.batch_size], active)
                     for i in range(0, size, cfg.batch_size)]
            rows += epoch
            took += [list(active)] * len(epoch)
            if cfg.target_kl is not None:  # one host sync per epoch, only when early stopping
                kl = torch.stack(epoch)[:, :, KL_INDEX].mean(0).tolist()
                active = [on and not kl_stops(k, cfg.target_kl)
                          for on, k in zip(active, kl, strict=True)]
                if not any(active):
                    break
        stacked = torch.stack(rows)
        return self._metrics(batch, stacked, torch.tensor(took, device=stacked.device), lr)

    def _minibatch_step(self, batch: RolloutBatch, idx: torch.Tensor,
                        active: list[bool]) -> torch.Tensor:
        """Each active seed's gradient step on its rows `idx[k]`; `[S, len(MINIBATCH_METRICS)]`."""
        cfg = self.cfg
        seed_rows = torch.arange(idx.shape[0], device=idx.device).unsqueeze(1)
        obs, actions = batch.obs[seed_rows, idx], batch.actions[seed_rows, idx]
        old_log_prob, old_values = batch.log_probs[seed_rows, idx], batch.values[seed_rows, idx]
        adv, returns = batch.advantages[seed_rows, idx], batch.returns[seed_rows, idx]
        if cfg.normalize_advantage:  # each seed's own moments
            adv = normalized(adv)
        masks = None if batch.action_masks is None else batch.action_masks[seed_rows, idx]
        dist, values = self.net.dist_value(obs, masks)  # masked: loss and entropy over valid ones
        loss, parts = ppo_loss(dist.log_prob(actions), old_log_prob, adv, values, old_values,
                               returns, dist.entropy(), cfg)  # [S] each
        self.optimizer.zero_grad()
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norms = grad_norm_step(self.optimizer, self.params, cfg.max_grad_norm, active=active)
        return torch.stack([*parts, norms, loss], dim=1).detach()

    def _metrics(self, batch: RolloutBatch, rows: torch.Tensor, took: torch.Tensor,
                 lr: float) -> list[Metrics]:
        """Each seed's means over the steps it took (`rows` [steps, S, M], `took` [steps, S])."""
        weights = took.to(rows.dtype).unsqueeze(-1)
        means = ((rows * weights).sum(0) / weights.sum(0)).tolist()  # one host sync
        counts = took.sum(0).tolist()
        stds = self.stds()
        out = []
        for k in range(len(self.members)):
            metrics = dict(zip(MINIBATCH_METRICS, means[k], strict=True))
            metrics["train/explained_variance"] = explained_variance(batch.values[k], batch.returns[k])
            metrics["train/learning_rate"] = lr
            metrics["train/n_updates"] = float(counts[k])
            if stds is not None:
                metrics["train/std"] = stds[k]
            out.append(metrics)
        return out

