"""Optimizers and gradient clipping for the algorithms, with the per-step Python of `torch.optim`
and `clip_grad_norm_` cut where the result is the same.

A small network's update is mostly per-call overhead, not arithmetic. Measured here (torch 2.13,
one thread, DQN CartPole update of a [64, 64] Q-network, batch 64, 590 µs in all):
`torch.optim.Adam(fused=True).step()` took 97 µs, of which its fused kernel took 11 µs; the rest
is generic machinery (hooks, profiler ranges, grouping tensors by device and dtype, state
checks). `zero_grad` took 18 µs and `clip_grad_norm_` 96 µs. `FusedAdam` and `clip_grad_norm`
call the same kernels with the same arguments, so results are bit-identical (tests/algos/
test_optim.py).

`FusedAdam` and `RMSprop` are not built on `torch.optim` at all: the first use of any
`torch.optim` optimizer imports `torch._dynamo` (torch 2.13: 1.1 s of CPU on the 2-core
development machine), which every run, sweep trial and torchrun rank paid. Without it a 512-step
smoke run's process took 3.3 s instead of 4.6-5.0 s (2026-11-26).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class LazyOptimizer:
    """A torch optimizer built on its first use: a step, its state or its learning rate. Every
    attribute is the built optimizer's (`param_groups`, `state_dict()`, `defaults`, ...).

    torch 2.13 imports `torch._dynamo` (~1 s on the 2-core development machine) the first time
    any `torch.optim` optimizer is constructed; built at the first update, the run's first env
    steps need not wait for it (issue 16: the first step within 2 s of the command). Only Adam
    without a fused kernel (torch < 2.4 on CPU) takes this path; see `FusedAdam`."""

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


class _LeanOptimizer:
    """One parameter group and per-parameter state in `torch.optim`'s layout (`param_groups`,
    `state`, `state_dict()`, `load_state_dict()`), without `torch.optim`. A subclass names its
    options (`defaults`), the state tensors of a parameter (`MOMENTS`) and the options it keeps
    at their plain values (`PLAIN`, refused in a loaded state), and implements `step`.

    With `seeds=S` the parameters are a seed batch's, stacked `[S, ...]` (`nets/seeded.py`):
    the moments are stacked alike, each seed keeps its own step count (`steps`, on the host: a
    seed whose PPO epochs stopped early sits steps out, `step(active)`), and seed k's state
    reads and loads in a single run's layout (`seed_state_dict(k)`, `load_seed_state_dict`),
    so a seed's checkpoint is its single run's."""

    MOMENTS: tuple[str, ...] = ()
    PLAIN: dict[str, Any] = {}

    def __init__(self, params: list[torch.Tensor], defaults: dict[str, Any],
                 seeds: int | None = None):
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = [{**defaults, "params": list(params)}]
        self.state: defaultdict[torch.Tensor, dict[str, torch.Tensor]] = defaultdict(dict)
        self.seeds = seeds
        self.steps = torch.zeros(seeds or 0, dtype=torch.float64)
        """Each seed's step count (seed batches only; a single run's is in `state`)."""

    def _live(self) -> list[list[torch.Tensor]]:
        """The parameters that have a gradient, by device and dtype."""
        return _by_device_and_dtype([p for p in self.param_groups[0]["params"]
                                     if p.grad is not None])

    def _step_device(self, p: torch.Tensor) -> torch.device:
        """Where torch keeps `p`'s step counter."""
        return torch.device("cpu")

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """`p`'s state, made as torch makes it before the first step (a seed batch's without
        "step": its counts are `steps`)."""
        state = self.state[p]
        if not state:
            if self.seeds is None:
                state["step"] = torch.zeros((), dtype=torch.float32, device=self._step_device(p))
            for name in self.MOMENTS:
                state[name] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def state_for(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """`p`'s state tensors (made, as before a first step, if it has none yet): what a
        compiled update steps in place (`algos/steps.py`)."""
        return self._state(p)

    def seed_state_dict(self, k: int) -> dict[str, Any]:
        """Seed k's state in a single run's `state_dict()` layout (seed batches only)."""
        params = self.param_groups[0]["params"]
        group = {key: v for key, v in self.param_groups[0].items() if key != "params"}
        state = {}
        for i, p in enumerate(params):
            if self.state.get(p):
                state[i] = {"step": torch.tensor(float(self.steps[k]), dtype=torch.float32,
                                                 device=self._step_device(p)),
                            **{name: self.state[p][name][k].clone(
                                memory_format=torch.contiguous_format) for name in self.MOMENTS}}
        return {"state": state, "param_groups": [{**group, "params": list(range(len(params)))}]}

    @torch.no_grad()
    def load_seed_state_dict(self, k: int, saved: dict[str, Any]) -> None:
        """Load seed k's state from a single run's `state_dict()` (this class's or torch's);
        a fresh one (no state) leaves seed k's moments and count as they are."""
        params = self.param_groups[0]["params"]
        if len(saved["param_groups"][0]["params"]) != len(params):
            raise ValueError("the saved optimizer state does not match this network's parameters")
        positions = {saved_id: i for i, saved_id in enumerate(saved["param_groups"][0]["params"])}
        for key, values in saved["state"].items():
            p = params[positions[key]]
            state = self._state(p)
            for name in self.MOMENTS:
                state[name][k].copy_(values[name])
            self.steps[k] = float(values["step"])

    def copy_to(self, k: int, optimizer: Any) -> None:
        """Seed k's state and learning rate into `optimizer`, its single run's own."""
        optimizer.load_state_dict(self.seed_state_dict(k))

    def copy_from(self, k: int, optimizer: Any) -> None:
        """Seed k's state and learning rate from `optimizer`, its single run's own."""
        self.load_seed_state_dict(k, optimizer.state_dict())
        self.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (`set_to_none=False`: zero them in place)."""
        for p in self.param_groups[0]["params"]:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.detach_().zero_()

    def state_dict(self) -> dict[str, Any]:
        """torch's format: per-parameter state by position, and the group with positions (a
        seed batch's: each "step" the seeds' counts `[S]`, so that every tensor's slice `[k]`
        is seed k's single-run state)."""
        params = self.param_groups[0]["params"]
        index = {id(p): i for i, p in enumerate(params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if s}
        if self.seeds is not None:
            for i, values in state.items():
                steps = self.steps.to(torch.float32).to(self._step_device(params[i]))
                state[i] = {"step": steps, **values}
        return {"state": state, "param_groups": [{**group, "params": list(range(len(params)))}]}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Continue from `state_dict()` (this class's or torch's optimizer's); ValueError, and
        nothing changed, when it is not one group of as many parameters with the plain options
        and tensors of the parameters' shapes."""
        groups, params = saved["param_groups"], self.param_groups[0]["params"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(params):
            raise ValueError("the saved optimizer state does not match this network's parameters")
        group = {k: v for k, v in groups[0].items() if k != "params"}
        if any(group.get(k, v) != v for k, v in self.PLAIN.items()):
            raise ValueError(f"the saved optimizer state sets options rltrain does not use "
                             f"({', '.join(self.PLAIN)}): {group}")
        state: defaultdict[torch.Tensor, dict[str, torch.Tensor]] = defaultdict(dict)
        positions = {saved_id: i for i, saved_id in enumerate(groups[0]["params"])}
        for key, values in saved["state"].items():
            p = params[positions[key]]
            if set(values) != {"step", *self.MOMENTS} or any(
                    values[k].shape != p.shape for k in self.MOMENTS):
                raise ValueError(f"the saved optimizer state of parameter {key} does not fit its "
                                 f"shape {tuple(p.shape)}")
            step = values["step"].to(dtype=torch.float32, device=self._step_device(p))
            state[p] = {"step": step.clone(), **{
                k: values[k].to(dtype=p.dtype, device=p.device).clone() for k in self.MOMENTS}}
        self.param_groups[0].update(group)
        self.state = state


class FusedAdam(_LeanOptimizer):
    """`torch.optim.Adam(params, lr, eps=eps, fused=True)` without `torch.optim` (no weight decay,
    amsgrad or hooks: what rltrain's algorithms use). A step is what torch's fused step runs,
    `_foreach_add_` on the step counters and `_fused_adam_`, so results are torch's bit for bit;
    state and `state_dict()` are torch's (checkpoints written with `torch.optim.Adam` load)."""

    MOMENTS = ("exp_avg", "exp_avg_sq")
    PLAIN = {"weight_decay": 0, "amsgrad": False, "maximize": False,
             "decoupled_weight_decay": False}

    def __init__(self, params: list[torch.Tensor], lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999), seeds: int | None = None):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, **self.PLAIN,
                                  "foreach": None, "capturable": False, "differentiable": False,
                                  "fused": True}, seeds)

    def _step_device(self, p: torch.Tensor) -> torch.device:
        return p.device  # fused: the counter lives with the parameter

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """One Adam step of every parameter that has a gradient (the others keep their state).
        A seed batch's Adam is `seed_optim.SeedAdam`, which steps its seeds."""
        if self.seeds is not None or active is not None:
            raise TypeError("a seed batch's Adam is rltrain.algos.seed_optim.SeedAdam")
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for params in self._live():
            states = [self._state(p) for p in params]
            steps = [s["step"] for s in states]
            torch._foreach_add_(steps, 1)
            fused_adam_(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                        [s["exp_avg_sq"] for s in states], steps, group["lr"], (beta1, beta2),
                        group["eps"])


class RMSprop(_LeanOptimizer):
    """`torch.optim.RMSprop(params, lr, alpha=alpha, eps=eps)` without `torch.optim` (no momentum,
    centering or weight decay: A2C's). torch's CPU step runs these elementwise ops tensor by
    tensor; here they run as foreach calls over all tensors, bit for bit the same."""

    MOMENTS = ("square_avg",)
    PLAIN = {"momentum": 0, "centered": False, "weight_decay": 0, "maximize": False}

    def __init__(self, params: list[torch.Tensor], lr: float, alpha: float, eps: float,
                 seeds: int | None = None):
        super().__init__(params, {"lr": lr, "momentum": 0, "alpha": alpha, "eps": eps,
                                  "centered": False, "weight_decay": 0, "capturable": False,
                                  "foreach": None, "maximize": False, "differentiable": False},
                         seeds)

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """square_avg ← α square_avg + (1 − α) g²; θ ← θ − lr g / (√square_avg + ε) (a seed
        batch's: every seed at once; A2C takes one step per rollout, so all are `active`)."""
        if active is not None and not all(active):
            raise ValueError("RMSprop steps every seed of a batch together")
        group = self.param_groups[0]
        if self.seeds is not None:
            self.steps += 1
        for params in self._live():
            states = [self._state(p) for p in params]
            if self.seeds is None:
                torch._foreach_add_([s["step"] for s in states], 1)
            rmsprop_(params, [p.grad for p in params], [s["square_avg"] for s in states],
                     group["lr"], group["alpha"], group["eps"])


# ---- the arithmetic of each optimizer step, written once: a single run's optimizers above and
# a seed batch's (`seed_optim.py`, over parameters stacked [S, ...]) both call these ------------

def fused_adam_(params: list[torch.Tensor], grads: list[torch.Tensor],
                exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
                steps: list[torch.Tensor], lr: float, betas: tuple[float, float],
                eps: float) -> None:
    """One Adam step (no weight decay, no amsgrad) in torch's fused kernel; `steps` hold each
    tensor's step count, already incremented, on the parameters' device."""
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=lr,
                       beta1=betas[0], beta2=betas[1], weight_decay=0.0, eps=eps,
                       maximize=False, grad_scale=None, found_inf=None)


def foreach_adam_(params: list[torch.Tensor], grads: list[torch.Tensor],
                  exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
                  step_sizes: list[torch.Tensor | float], bias2_sqrts: list[torch.Tensor | float],
                  betas: tuple[float, float], eps: float) -> None:
    """Adam's arithmetic as foreach calls, for a torch build without the fused kernel:
    m ← β1 m + (1 − β1) g; v ← β2 v + (1 − β2) g²; θ ← θ − s m / (√v / b + ε), with each
    tensor's step size s = lr / (1 − β1^t) and b = √(1 − β2^t) (a seed batch's broadcast per
    seed: its seeds may have taken different numbers of steps)."""
    beta1, beta2 = betas
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bias2_sqrts)
    torch._foreach_add_(denom, eps)
    update = torch._foreach_mul(exp_avgs, step_sizes)
    torch._foreach_addcdiv_(params, update, denom, value=-1.0)


def rmsprop_(params: list[torch.Tensor], grads: list[torch.Tensor],
             square_avgs: list[torch.Tensor], lr: float, alpha: float, eps: float) -> None:
    """square_avg ← α square_avg + (1 − α) g²; θ ← θ − lr g / (√square_avg + ε) (no momentum,
    not centered, no weight decay: A2C's), as torch's CPU step computes it."""
    torch._foreach_mul_(square_avgs, alpha)
    torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
    avg = torch._foreach_sqrt(square_avgs)
    torch._foreach_add_(avg, eps)
    torch._foreach_addcdiv_(params, grads, avg, value=-lr)


def clip_scale(max_norm: float, total: torch.Tensor) -> torch.Tensor:
    """The factor `clip_grad_norm_` scales gradients of global norm `total` by (per seed when
    `total` is `[S]`): min(1, max_norm / (total + 1e-6)); no host sync."""
    return torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)


def _by_device_and_dtype(params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """`params` in groups of one device and dtype (one group, in order, in every rltrain run)."""
    first = params[0] if params else None
    if first is None or all(p.device == first.device and p.dtype == first.dtype for p in params):
        return [params] if params else []
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    for p in params:
        groups.setdefault((p.device, p.dtype), []).append(p)
    return list(groups.values())


Optimizer = torch.optim.Optimizer | LazyOptimizer | FusedAdam | RMSprop
"""What the helpers here take: a torch optimizer, one built on its first use, or a lean one."""


@functools.cache
def has_fused_adam(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether this torch build has a fused Adam kernel for `device` and `dtype` (CPU: torch 2.4
    and later), tried on a one-element tensor."""
    if not hasattr(torch, "_fused_adam_"):
        return False
    t = [torch.zeros(1, device=device, dtype=dtype) for _ in range(4)]
    try:
        torch._fused_adam_([t[0]], [t[1]], [t[2]], [t[3]], [],
                           [torch.ones((), device=device, dtype=torch.float32)], amsgrad=False,
                           lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                           maximize=False, grad_scale=None, found_inf=None)
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True


def adam(params: Any, lr: float, eps: float = 1e-8,
         betas: tuple[float, float] = (0.9, 0.999)) -> FusedAdam | LazyOptimizer:
    """Adam (`betas`: its moments' decay rates, torch's defaults unless given; CrossQ's β1 is
    0.5): `FusedAdam` where this torch build has a fused kernel for the parameters' device and
    dtype, else torch's own (single-tensor) Adam, built on first use.

    On CPU the single-tensor Adam loops over parameters in Python: the fused kernel cut the step
    of a [64, 64] actor-critic from 0.77 ms to about 0.15 ms here.
    """
    params = list(params)
    if params and all(has_fused_adam(p.device, p.dtype) for p in params):
        return FusedAdam(params, lr, eps, tuple(betas))
    return LazyOptimizer(lambda: torch.optim.Adam(params, lr=lr, eps=eps, betas=tuple(betas)))


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
    torch._foreach_mul_(grads, clip_scale(max_norm, total))
    return total
