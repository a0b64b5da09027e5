"""Proximal Policy Optimization (Schulman et al. 2017) with the details of Engstrom et al. 2020."""

from __future__ import annotations

from typing import Any

import torch

from rltrain import obs as obs_ops
from rltrain.algos.base import (
    ActorCriticSeeds,
    actor_critic_state,
    by_seed,
    each_seed,
    explained_variance,
    grad_norm_step,
    load_actor_critic_state,
    make_actor_critic,
    make_noise_clock,
    make_recurrent_actor_critic,
    metric_rows,
    normalized,
    on_policy_lr,
    policy_stds,
    row_index,
    sample_rollout_step,
    set_lr,
    step_means,
)
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.draws import Draws
from rltrain.algos.optim import adam
from rltrain.buffers.sequences import (
    RecurrentMemory,
    SequenceBatch,
    sequence_length,
    sequence_minibatches,
)
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, RolloutBatch


class PPO(ActorCriticSeeds):
    """PPO-clip: owns the actor-critic and its optimizer; `update` takes a `RolloutBatch`.

    `PPO.stack(members, streams)` is the same algorithm for a batch of seeds (`ActorCriticSeeds`:
    MLP actor-critics on vector observations): `act`, `value` and `update` take inputs with a
    leading seed dimension, and each seed gets its own minibatch orders, advantage moments, KL
    early stop (a stopped seed sits out the rest of the update) and metrics."""

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
        self.params = list(self.policy.parameters())
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)
        self.draws: Any = Draws(self.device)  # a seed batch's: each seed's stream

    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            episode_starts: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (action, log_prob, value) for a rollout step (`action_mask`: valid actions;
        `episode_starts` [N]: recurrent only, the rows whose `obs` begins an episode)."""
        if not self.recurrent:
            return sample_rollout_step(self.policy, obs, self.noise_clock, action_mask,
                                       self.draws)
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

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Any:
        """Minibatch epochs over one rollout; returns averaged `train/*` metrics (a seed batch,
        fields `[S, B, ...]`: one dict per seed, as its single run's `update` returns it)."""
        cfg = self.cfg
        if self.noise_clock is not None:  # the next rollout starts with new gSDE noise
            self.noise_clock.restart()
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        recorded = self.memory.take() if self.recurrent else None
        rows, took = self._epochs(batch, recorded)
        return self._metrics(batch, rows, took, lr)

    def _epochs(self, batch: RolloutBatch, recorded: tuple[torch.Tensor, torch.Tensor] | None,
                ) -> tuple[torch.Tensor, list[list[bool]]]:
        """The epochs' minibatch steps until the KL stop: their metrics `[steps, (S,) M]`, and
        which seeds took each step (a single run is one seed)."""
        cfg = self.cfg
        active = [True] * by_seed(batch.advantages).shape[0]  # a KL-stopped seed sits out the rest
        rows: list[torch.Tensor] = []
        took: list[list[bool]] = []
        for _ in range(cfg.n_epochs):
            minibatches = self._minibatches(batch.advantages.shape[-1], recorded, active)
            # the advantages' mean and std per minibatch, over every rank's minibatch under
            # torchrun: one collective per epoch, not one per minibatch (a seed batch: per seed)
            moments = (self.collective.moments_many([batch.advantages[row_index(i)]
                                                     for i, _ in minibatches])
                       if cfg.normalize_advantage else [None] * len(minibatches))
            epoch = [self._minibatch_step(batch, idx, seq, m, active)
                     for (idx, seq), m in zip(minibatches, moments, strict=True)]
            rows += epoch
            took += [list(active)] * len(epoch)
            if cfg.target_kl is not None:  # one host sync per epoch, only when early stopping
                kl = self.collective.mean(torch.stack(epoch)[..., KL_INDEX].mean(0))
                # every rank takes the same decision; each seed its own
                active = [on and not kl_stops(k, cfg.target_kl)
                          for on, k in zip(active, kl.reshape(-1).tolist(), strict=True)]
                if not any(active):
                    break
        return torch.stack(rows), took

    def _metrics(self, batch: RolloutBatch, rows: torch.Tensor, took: list[list[bool]],
                 lr: float) -> Any:
        """The update's metrics, each seed's means over the steps it took: one host sync for
        the minibatch metrics, which stayed on the device until here."""
        means, counts = step_means(rows, took)
        out = metric_rows(MINIBATCH_METRICS, means)
        stds = policy_stds(self.policy) if self.spec.action_kind == "box" else None
        values, returns = by_seed(batch.values), by_seed(batch.returns)
        for k, metrics in enumerate(each_seed(out)):
            metrics["train/explained_variance"] = explained_variance(values[k], returns[k])
            metrics["train/learning_rate"] = lr
            metrics["train/n_updates"] = float(counts[k])
            if stds is not None:
                metrics["train/std"] = stds[k]
        return out

    def _minibatch_step(self, batch: RolloutBatch, idx: torch.Tensor,
                        seq: SequenceBatch | None = None,
                        moments: tuple[torch.Tensor, torch.Tensor] | None = None,
                        active: list[bool] | None = None) -> torch.Tensor:
        """One gradient step on the rows `idx` (recurrent: the rows of the sequences `seq`; a
        seed batch: seed k's on its rows `idx[k]`, the `active` seeds stepping); returns the
        `MINIBATCH_METRICS` values as one tensor (a seed batch: `[S, M]`)."""
        at = row_index(idx)
        obs, actions = obs_ops.take(batch.obs, at), batch.actions[at]
        old_log_prob, old_values = batch.log_probs[at], batch.values[at]
        adv, returns = batch.advantages[at], batch.returns[at]
        if moments is not None:  # normalize_advantage (see `_epochs`)
            adv = normalized(adv, moments)
        masks = None if batch.action_masks is None else batch.action_masks[at]
        dist, values = self._forward(obs, masks, seq)  # masked: loss and entropy over valid actions
        loss, parts = ppo_loss(self.policy.head.log_prob(dist, actions), old_log_prob, adv,
                               values, old_values, returns, self.policy.head.entropy(dist),
                               self.cfg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norm = grad_norm_step(self.optimizer, self.params, self.cfg.max_grad_norm,
                              self.collective.average_, active)
        return torch.stack([*parts, norm.to(loss.dtype), loss], -1).detach()

    def _minibatches(self, size: int, recorded: tuple[torch.Tensor, torch.Tensor] | None,
                     active: list[bool]) -> list[tuple[torch.Tensor, SequenceBatch | None]]:
        """One epoch's minibatches: shuffled rows (a seed batch: each seed's own order, `[S, b]`
        each; a seed not `active` draws none), or (recurrent) shuffled whole sequences."""
        if recorded is None:
            perm = self.draws.randperm(size, active)
            return [(perm[..., i:i + self.cfg.batch_size], None)
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
# and a seed batch's `[S, B]` (`PPO.stack`) one value per seed ---------------------------------

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


def stack(members: list[PPO], streams: Any) -> PPO:
    """A seed batch's PPO (`seed_batch/batch.py` looks for this beside `build`)."""
    return PPO.stack(members, streams)
