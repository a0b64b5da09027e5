"""On-policy rollout storage and generalized advantage estimation."""

from __future__ import annotations

import torch

from rltrain import obs as obs_ops
from rltrain.types import RolloutBatch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE(λ) advantages and returns; every input is `[T, N]`.

    `next_values[t]` is V of the true next observation of step t (for a truncated step, V of its
    final observation). `terminated[t]` removes the bootstrap; `done[t]` (terminated or
    truncated) stops the advantage recursion, so no sum crosses an episode boundary.
        δ_t = r_t + γ (1 − term_t) V(s'_t) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1}
    """
    not_term = 1.0 - terminated.float()
    not_done = 1.0 - done.float()
    deltas = rewards + gamma * not_term * next_values - values
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        last = deltas[t] + gamma * gae_lambda * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


class RolloutBuffer:
    """Preallocated `[T, N]` storage for one rollout on the training device."""

    def __init__(self, n_steps: int, num_envs: int, obs_shape: tuple[int, ...] | obs_ops.Layout,
                 action_shape: tuple[int, ...], action_dtype: torch.dtype, device: torch.device,
                 obs_dtype: torch.dtype = torch.float32):
        """`obs_shape` with `obs_dtype`, or a Dict observation's layout `{key: (shape, dtype)}`
        (`rltrain/obs.py`): one tensor per entry."""
        self.n_steps, self.num_envs, self.device = n_steps, num_envs, device
        t, n = n_steps, num_envs
        # uint8 for pixel envs (their observations stay bytes until the network's first layer)
        layout = obs_shape if isinstance(obs_shape, dict) else (tuple(obs_shape), obs_dtype)
        self.obs = obs_ops.zeros((t, n), layout, device)
        self.actions = torch.zeros((t, n, *action_shape), dtype=action_dtype, device=device)
        self.log_probs = torch.zeros((t, n), device=device)
        self.values = torch.zeros((t, n), device=device)
        self.rewards = torch.zeros((t, n), device=device)
        self.terminated = torch.zeros((t, n), dtype=torch.bool, device=device)
        self.truncated = torch.zeros((t, n), dtype=torch.bool, device=device)
        self.truncated_values = torch.zeros((t, n), device=device)
        self.action_masks: torch.Tensor | None = None  # [T, N, n] bool, on the first masked add
        self.step = 0

    def add(self, obs: torch.Tensor, action: torch.Tensor, log_prob: torch.Tensor,
            value: torch.Tensor, reward: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor, action_mask: torch.Tensor | None = None) -> None:
        """Store step `self.step`; the caller fills `truncated_values` for truncated rows.
        `action_mask` [N, n]: the valid actions at `obs` (a masked env gives one every step)."""
        t = self.step
        if action_mask is not None:
            if self.action_masks is None:
                self.action_masks = torch.ones((self.n_steps, *action_mask.shape),
                                               dtype=torch.bool, device=self.device)
            self.action_masks[t] = action_mask
        obs_ops.put(self.obs, t, obs)
        self.actions[t], self.log_probs[t] = action, log_prob
        self.values[t], self.rewards[t] = value, reward
        self.terminated[t], self.truncated[t] = terminated, truncated
        self.truncated_values[t] = 0.0
        self.step += 1

    @property
    def full(self) -> bool:
        """True once `n_steps` steps are stored."""
        return self.step == self.n_steps

    def finish(self, last_value: torch.Tensor, gamma: float, gae_lambda: float) -> RolloutBatch:
        """Compute advantages, flatten to `[T*N, ...]`, and reset for the next rollout."""
        assert self.full, "finish() before the rollout is full"
        next_values = torch.cat([self.values[1:], last_value.unsqueeze(0)], 0)
        next_values = torch.where(self.truncated, self.truncated_values, next_values)
        done = self.terminated | self.truncated
        adv, ret = compute_gae(self.rewards, self.values, next_values, self.terminated, done,
                               gamma, gae_lambda)
        self.step = 0
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        masks = None if self.action_masks is None else flat(self.action_masks)
        return RolloutBatch(obs_ops.apply(flat, self.obs), flat(self.actions), flat(self.log_probs),
                            flat(self.values), flat(adv), flat(ret), masks, flat(self.rewards),
                            flat(done))
