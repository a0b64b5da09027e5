"""Optimizers and gradient clipping for the algorithms: torch's own, built on first use, with
the per-step Python of `torch.optim` and `clip_grad_norm_` cut where the result is the same.

A small network's update is mostly per-call overhead, not arithmetic. Measured here (torch 2.13,
one thread, DQN CartPole update of a [64, 64] Q-network, batch 64, 590 µs in all):
`torch.optim.Adam(fused=True).step()` took 97 µs, of which its fused kernel took 11 µs; the rest
is generic machinery (hooks, profiler ranges, grouping tensors by device and dtype, state
checks). `zero_grad` took 18 µs and `clip_grad_norm_` 96 µs. `LazyAdam` and `clip_grad_norm`
call the same kernels with the same arguments, so results are bit-identical (tests/algos/
test_optim.py), and fall back to torch's code for anything they do not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim import optimizer as torch_optimizer


class LazyOptimizer:
    """A torch optimizer built on its first use: a step, its state or its learning rate. Every
    attribute is the built optimizer's (`param_groups`, `state_dict()`, `defaults`, ...).

    torch 2.13 imports `torch._dynamo` (~1 s on the 2-core development machine) the first time
    any optimizer is constructed; built at the first update, the run's first env steps need not
    wait for it (issue 16: the first step within 2 s of the command)."""

    def __init__(self, build: Callable[[], torch.optim.Optimizer]):
        self._build = build
        self._optimizer: torch.optim.Optimizer | None = None

    @property
    def built(self) -> torch.optim.Optimizer:
        """The optimizer (built now when this is its first use)."""
        if self._optimizer is None:
            self._optimizer = self._build()
        return self._optimizer

    def __getattr__(self, name: str) -> Any:  # only names this class lacks: the optimizer's
        if name.startswith("__") or name in ("_build", "_optimizer"):  # copy / pickle probes
            raise AttributeError(name)
        return getattr(self.built, name)


Optimizer = torch.optim.Optimizer | LazyOptimizer
"""What the helpers here take: a torch optimizer, or one built on its first use."""

_LEAN_OFF = ("amsgrad", "maximize", "capturable", "differentiable", "foreach")
"""Adam options the lean step does not implement: any of them set, torch's own step runs."""


class LazyAdam(LazyOptimizer):
    """`torch.optim.Adam` built on first use whose `step` and `zero_grad` skip torch.optim's
    generic per-call Python when the optimizer is plain fused Adam (one parameter group, no
    hooks, state already made by a first ordinary step): then a step is torch's own two calls,
    `_foreach_add_` on the step counters and `_fused_adam_`. State, `state_dict()` and
    `load_state_dict()` are the torch optimizer's, untouched."""

    def step(self) -> None:
        """One Adam step of every parameter that has a gradient."""
        opt = self.built
        lists = _fused_adam_lists(opt)
        if lists is None:
            opt.step()
            return
        group = opt.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = lists
        beta1, beta2 = group["betas"]
        with torch.no_grad():  # as torch's step: in-place on leaves that require grad
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                               lr=group["lr"], beta1=beta1, beta2=beta2,
                               weight_decay=group["weight_decay"], eps=group["eps"],
                               maximize=False, grad_scale=None, found_inf=None)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (`set_to_none=False`: torch's own zeroing)."""
        if not set_to_none:
            self.built.zero_grad(set_to_none=False)
            return
        for group in self.built.param_groups:
            for p in group["params"]:
                p.grad = None


def _no_step_hooks(opt: torch.optim.Optimizer) -> bool:
    """True when no step hook (the optimizer's own or a global one) waits for `opt.step()`."""
    return not (opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks
                or torch_optimizer._global_optimizer_pre_hooks
                or torch_optimizer._global_optimizer_post_hooks)


def _fused_adam_lists(opt: torch.optim.Optimizer) -> tuple[list[torch.Tensor], ...] | None:
    """(params, grads, exp_avgs, exp_avg_sqs, steps) for the lean fused step, or None when torch's
    own step must run: not a plain fused Adam, hooks, a first step (no state yet), sparse
    gradients, or parameters of more than one device or dtype."""
    if type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1 or not _no_step_hooks(opt):
        return None
    group = opt.param_groups[0]
    if not group.get("fused") or any(group.get(k) for k in _LEAN_OFF) \
            or group.get("decoupled_weight_decay") or not hasattr(torch, "_fused_adam_") \
            or any(isinstance(group[k], torch.Tensor) for k in ("lr", "weight_decay", "eps")) \
            or any(isinstance(b, torch.Tensor) for b in group["betas"]):
        return None
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return None
    first = params[0]
    lists: tuple[list[torch.Tensor], ...] = (params, [], [], [], [])
    for p in params:
        state = opt.state.get(p)
        if not state or p.grad.is_sparse or p.device != first.device or p.dtype != first.dtype:
            return None
        lists[1].append(p.grad)
        lists[2].append(state["exp_avg"])
        lists[3].append(state["exp_avg_sq"])
        lists[4].append(state["step"])
    return lists


def adam(params: Any, lr: float, eps: float = 1e-8) -> LazyAdam:
    """Adam (built on first use: `LazyAdam`), fused where this torch build has a kernel for
    the parameters' device.

    On CPU the default (single-tensor) Adam loops over parameters in Python: the fused kernel
    cut the step of a [64, 64] actor-critic from 0.77 ms to about 0.15 ms here.
    """
    params = list(params)

    def build() -> torch.optim.Optimizer:
        try:
            return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
        except (RuntimeError, TypeError, ValueError):  # older torch, or no fused kernel here
            return torch.optim.Adam(params, lr=lr, eps=eps)

    return LazyAdam(build)


def grad_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The global 2-norm of `grads` (non-empty, one device and dtype) as torch's clip computes it:
    the norm of the per-tensor norms; a 0-d tensor, no host sync."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`nn.utils.clip_grad_norm_(params, max_norm, foreach=True)`: scale the gradients so that
    their global 2-norm is at most `max_norm`; returns the norm before clipping (a 0-d tensor).
    Gradients on one device with one dtype take torch's own ops without its grouping; others
    take torch's function."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads or any(g.device != grads[0].device or g.dtype != grads[0].dtype
                        or g.is_sparse for g in grads):
        return nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    total = grad_norm(grads)
    # clip_coef = max_norm / (total + 1e-6), clamped to 1: torch's expression, no sync
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total
