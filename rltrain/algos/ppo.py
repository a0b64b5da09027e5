"""Proximal Policy Optimization (Schulman et al. 2017) with the details of Engstrom et al. 2020."""

from __future__ import annotations

from typing import Any

import torch

from rltrain import obs as obs_ops
from rltrain.algos.base import (
    actor_critic_state,
    explained_variance,
    grad_norm_step,
    load_actor_critic_state,
    make_actor_critic,
    make_noise_clock,
    make_recurrent_actor_critic,
    normalized,
    on_policy_lr,
    policy_std,
    sample_rollout_step,
    set_lr,
)
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.optim import adam
from rltrain.buffers.sequences import (
    RecurrentMemory,
    SequenceBatch,
    sequence_length,
    sequence_minibatches,
)
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, Metrics, RolloutBatch


class PPO:
    """PPO-clip: owns the actor-critic and its optimizer; `update` takes a `RolloutBatch`."""

    def __init__(self, cfg: PPOConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        self.recurrent = cfg.recurrent != "none"
        if self.recurrent:  # the state of the envs' current episodes, and the rollout's record
            self.policy = make_recurrent_actor_critic(cfg, spec).to(self.device)
            self.rnn_state = self.policy.initial_state(spec.num_envs, self.device)
            self.memory = RecurrentMemory()
        else:
            self.policy = make_actor_critic(cfg, spec).to(self.device)
        self.noise_clock = make_noise_clock(cfg)  # gSDE only: new noise at each rollout start
        self.optimizer = adam(self.policy.parameters(), cfg.lr, eps=cfg.adam_eps)
        self._params = list(self.policy.parameters())
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)

    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            episode_starts: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (action, log_prob, value) for a rollout step (`action_mask`: valid actions;
        `episode_starts` [N]: recurrent only, the rows whose `obs` begins an episode)."""
        if not self.recurrent:
            return sample_rollout_step(self.policy, obs, self.noise_clock, action_mask)
        return self._recurrent_act(obs, action_mask, episode_starts)

    @torch.no_grad()
    def _recurrent_act(self, obs: torch.Tensor, mask: torch.Tensor | None,
                       starts: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        if starts is None:
            starts = torch.zeros(obs_ops.rows(obs), dtype=torch.bool, device=obs_ops.device(obs))
        if self.noise_clock is not None and self.noise_clock.tick():
            self.policy.head.sde.resample(obs_ops.rows(obs))
        actor, critic, state = self.policy.step(obs, self.rnn_state, starts)
        dist = self.policy.dist(actor, mask)
        action = dist.sample()
        self.memory.record(self.rnn_state, starts)
        self.rnn_state = state
        return action, self.policy.head.log_prob(dist, action), self.policy.value(critic)

    @torch.no_grad()
    def value(self, obs: torch.Tensor, episode_starts: torch.Tensor | None = None) -> torch.Tensor:
        """V(obs), detached. Recurrent: from the state after the last acting step, zeroed for
        the `episode_starts` rows (a truncated episode's final observation passes none)."""
        if not self.recurrent:
            return self.policy.value(obs)
        starts = (torch.zeros(obs_ops.rows(obs), dtype=torch.bool, device=obs_ops.device(obs))
                  if episode_starts is None else episode_starts)
        return self.policy.value(self.policy.step(obs, self.rnn_state, starts)[1])

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Metrics:
        """Minibatch epochs over one rollout; returns averaged `train/*` metrics."""
        cfg = self.cfg
        if self.noise_clock is not None:  # the next rollout starts with new gSDE noise
            self.noise_clock.restart()
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        recorded = self.memory.take() if self.recurrent else None
        rows: list[torch.Tensor] = []
        for _ in range(cfg.n_epochs):
            minibatches = self._minibatches(obs_ops.rows(batch.obs), recorded)
            # the advantages' mean and std per minibatch, over every rank's minibatch under
            # torchrun: one collective per epoch, not one per minibatch
            moments = (self.collective.moments_many([batch.advantages[i] for i, _ in minibatches])
                       if cfg.normalize_advantage else [None] * len(minibatches))
            epoch = [self._minibatch_step(batch, idx, seq, m)
                     for (idx, seq), m in zip(minibatches, moments, strict=True)]
            rows += epoch
            if cfg.target_kl is not None:  # one host sync per epoch, only when early stopping
                kl = torch.stack(epoch)[:, KL_INDEX].mean()
                kl = self.collective.mean(kl).item()  # every rank takes the same decision
                if kl_stops(kl, cfg.target_kl):
                    break
        # one host sync per update: the minibatch metrics stay on the device until here
        metrics = dict(zip(MINIBATCH_METRICS, torch.stack(rows).mean(0).tolist(), strict=True))
        metrics["train/explained_variance"] = explained_variance(batch.values, batch.returns)
        metrics["train/learning_rate"] = lr
        metrics["train/n_updates"] = float(len(rows))
        if self.spec.action_kind == "box":
            metrics["train/std"] = policy_std(self.policy)
        return metrics

    def _minibatch_step(self, batch: RolloutBatch, idx: torch.Tensor,
                        seq: SequenceBatch | None = None,
                        moments: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """One gradient step on the rows `idx` (recurrent: the rows of the sequences `seq`);
        returns the `MINIBATCH_METRICS` values as one tensor."""
        obs, actions = obs_ops.take(batch.obs, idx), batch.actions[idx]
        old_log_prob, old_values = batch.log_probs[idx], batch.values[idx]
        adv, returns = batch.advantages[idx], batch.returns[idx]
        if moments is not None:  # normalize_advantage (see `update`)
            adv = normalized(adv, moments)
        masks = None if batch.action_masks is None else batch.action_masks[idx]
        dist, values = self._forward(obs, masks, seq)  # masked: loss and entropy over valid actions
        loss, parts = ppo_loss(self.policy.head.log_prob(dist, actions), old_log_prob, adv,
                               values, old_values, returns, self.policy.head.entropy(dist),
                               self.cfg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = grad_norm_step(self.optimizer, self._params, self.cfg.max_grad_norm,
                              self.collective.average_)
        return torch.stack([*parts, norm.to(loss.dtype), loss]).detach()

    def _minibatches(self, size: int, recorded: tuple[torch.Tensor, torch.Tensor] | None,
                     ) -> list[tuple[torch.Tensor, SequenceBatch | None]]:
        """One epoch's minibatches: shuffled rows, or (recurrent) shuffled whole sequences."""
        if recorded is None:
            perm = torch.randperm(size, device=self.device)
            return [(perm[i:i + self.cfg.batch_size], None)
                    for i in range(0, size, self.cfg.batch_size)]
        states, starts = recorded
        seq_len = sequence_length(starts.shape[0], self.cfg.sequence_len())
        return [(seq.rows, seq) for seq in
                sequence_minibatches(states, starts, seq_len, self.cfg.batch_size)]

    def _forward(self, obs: torch.Tensor, masks: torch.Tensor | None,
                 seq: SequenceBatch | None) -> tuple[Any, torch.Tensor]:
        """(the action distribution, V) at the minibatch's rows, with gradients."""
        if seq is None:
            return self.policy.dist_value(obs, masks)
        steps, count = seq.starts.shape
        actor, critic, _ = self.policy.sequence(obs_ops.apply(lambda t: t.reshape(steps, count, *t.shape[1:]), obs),
                                                seq.state, seq.starts)
        return self.policy.dist(actor, masks), self.policy.value(critic)

    def state_dict(self) -> dict[str, Any]:
        """Network, optimizer (the held gSDE noise, the recurrent state) as plain data."""
        state = actor_critic_state(self.policy, self.optimizer, self.noise_clock)
        if self.recurrent:
            state["rnn_state"] = self.rnn_state.detach().cpu().clone()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        load_actor_critic_state(self.policy, self.optimizer, self.noise_clock, state)
        saved = state.get("rnn_state")
        if not self.recurrent or saved is None:
            return
        layers, n, width = self.rnn_state.shape
        if not isinstance(saved, torch.Tensor) or saved.dim() != 3 \
                or (saved.shape[0], saved.shape[2]) != (layers, width):
            raise ValueError(f"the saved recurrent state {list(getattr(saved, 'shape', []))} "
                             f"does not fit [{layers}, N, {width}]")
        if saved.shape[1] == n:  # another env count (eval, export) starts from zeros instead
            self.rnn_state = saved.to(self.device, self.rnn_state.dtype)


MINIBATCH_METRICS = ("train/policy_loss", "train/value_loss", "train/entropy_loss",
                     "train/approx_kl", "train/clip_fraction", "train/grad_norm", "train/loss")
"""The per-minibatch metrics, in the order `PPO._minibatch_step` returns them: `ppo_loss`'s
parts, the gradient norm, the loss."""
KL_INDEX = MINIBATCH_METRICS.index("train/approx_kl")


# ---- PPO's math, written once: over the last dimension, so a minibatch `[B]` gives scalars
# and a seed batch's `[S, B]` (`seeds/ppo.py`) one value per seed -----------------------------

def ppo_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, adv: torch.Tensor,
             values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
             entropy: torch.Tensor, cfg: PPOConfig) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(loss, [policy loss, value loss, −entropy, approx KL, clip fraction]): the clipped
    surrogate, the (optionally clipped) value loss and the entropy bonus of one minibatch."""
    log_ratio = log_prob - old_log_prob
    policy_loss, clip_frac = clipped_surrogate(log_ratio, adv, cfg.clip_range)
    v_loss = value_loss(values, old_values, returns, cfg.clip_range_vf)
    entropy = entropy.mean(-1)
    loss = policy_loss + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
    with torch.no_grad():  # http://joschu.net/blog/kl-approx.html: E[(r − 1) − log r]
        approx_kl = ((log_ratio.exp() - 1) - log_ratio).mean(-1)
    return loss, [policy_loss, v_loss, -entropy, approx_kl, clip_frac]


def clipped_surrogate(log_ratio: torch.Tensor, adv: torch.Tensor,
                      eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(−E[min(r A, clip(r, 1 − ε, 1 + ε) A)], the fraction of clipped ratios)."""
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    clip_frac = ((ratio - 1).abs() > eps).float().mean(-1)
    return -surrogate.mean(-1), clip_frac


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None) -> torch.Tensor:
    """Squared error to the GAE returns, optionally clipped around the old values."""
    if clip is None:
        return (returns - values).pow(2).mean(-1)
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    return torch.max((returns - values).pow(2), (returns - clipped).pow(2)).mean(-1)


def kl_stops(approx_kl: float, target_kl: float) -> bool:
    """The early stop of an update's epochs: the epoch's mean approx KL above 1.5 target_kl."""
    return approx_kl > 1.5 * target_kl


def build(cfg: PPOConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> PPO:
    """Registry builder."""
    return PPO(cfg, spec, device)
