"""The two algorithm protocols and small functions the algorithms share."""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import torch
from torch import nn

from rltrain.types import Metrics, RolloutBatch, TransitionBatch


class Policy(Protocol):
    """What evaluation and export need: an `nn.Module` mapping observations to env actions."""

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor: ...


class OnPolicyAlgorithm(Protocol):
    """PPO, A2C: act on the rollout, then update once per rollout."""

    policy: nn.Module

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value) for a batch of observations, all detached."""
        ...

    def value(self, obs: torch.Tensor) -> torch.Tensor: ...

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Metrics: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class OffPolicyAlgorithm(Protocol):
    """DQN, DDPG, TD3, SAC: act with exploration, one gradient step per `update`."""

    policy: nn.Module

    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor: ...

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 − Var[target − pred] / Var[target]; nan when the target has no variance."""
    var = target.var()
    if var.item() == 0:
        return float("nan")
    return float(1.0 - (target - pred).var() / var)


def adam(params: Any, lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam, fused where this torch build has a kernel for the parameters' device.

    On CPU the default (single-tensor) Adam loops over parameters in Python: the fused kernel
    cut the step of a [64, 64] actor-critic from 0.77 ms to about 0.15 ms here.
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    except (RuntimeError, TypeError, ValueError):  # older torch, or a device without a fused kernel
        return torch.optim.Adam(params, lr=lr, eps=eps)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def grad_norm_step(optimizer: torch.optim.Optimizer, params: list[torch.Tensor],
                   max_grad_norm: float | None) -> torch.Tensor:
    """Clip gradients (when `max_grad_norm` is set), step, and return the pre-clip norm.

    The norm stays a (detached, 0-d) tensor on the device, so callers decide when to sync.
    """
    if max_grad_norm is not None and max_grad_norm > 0:
        norm = nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True)
    else:
        grads = [p.grad for p in params if p.grad is not None]
        norm = (torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) if grads
                else torch.zeros((), device=params[0].device))
    optimizer.step()
    return norm.detach()


def mean_metrics(rows: list[dict[str, float]]) -> Metrics:
    """Average metric dicts key by key (a key missing from some rows averages over the others)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for k, v in row.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    return {k: sums[k] / counts[k] for k in sums}


# target module -> (target params, source params, target buffers, source buffers); walking the
# module tree on every call cost ~0.3 ms per SAC update (profiled), the tensors never change.
_POLYAK_PAIRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """θ_target ← τ θ_source + (1 − τ) θ_target (τ = 1 copies); buffers are copied."""
    pairs = _POLYAK_PAIRS.get(target)
    if pairs is None or pairs[4] is not source:
        pairs = (list(target.parameters()), list(source.parameters()), list(target.buffers()),
                 list(source.buffers()), source)
        _POLYAK_PAIRS[target] = pairs
    t_params, s_params, t_bufs, s_bufs, _ = pairs
    if tau >= 1.0:
        torch._foreach_copy_(t_params, s_params)
    else:
        torch._foreach_lerp_(t_params, s_params, tau)
    if t_bufs:
        torch._foreach_copy_(t_bufs, s_bufs)


def td_target(reward: torch.Tensor, next_value: torch.Tensor, terminated: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) V(s'); truncated transitions keep the bootstrap."""
    return reward + gamma * (1.0 - terminated) * next_value


def twin_critic_step(critic: nn.Module, optimizer: torch.optim.Optimizer, batch: TransitionBatch,
                     y: torch.Tensor) -> Metrics:
    """One MSE step of both critics of a `TwinQ` (output [2, B]) towards the TD target `y` [B]."""
    q = critic(batch.obs, batch.actions)
    losses = (q - y).pow(2).mean(-1)
    optimizer.zero_grad(set_to_none=True)
    losses.sum().backward()
    optimizer.step()
    c1, c2 = losses.detach().tolist()
    return {"train/critic1_loss": c1, "train/critic2_loss": c2, "train/q_loss": (c1 + c2) / 2,
            "train/mean_q": q.detach().mean().item()}
