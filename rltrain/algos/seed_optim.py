"""A seed batch's optimizer steps and gradient clipping: parameters stacked `[S, ...]`
(`nets/seeded.py`), one norm, clip factor and Adam step count per seed. The arithmetic is
`algos/optim.py`'s kernels, the ones each seed's single run steps with, so a seed in a batch
steps as it would alone (tests/seed_batch/test_optim.py)."""

from __future__ import annotations

from typing import Any

import torch

from rltrain.algos.optim import (
    FusedAdam,
    RMSprop,
    clip_scale,
    foreach_adam_,
    fused_adam_,
    grad_norm,
)
from rltrain.errors import UserError


class SeedAdam(FusedAdam):
    """`FusedAdam` over a seed batch's stacked parameters (`seeds=S`): each seed keeps its own
    step count (`steps`) and a step moves the `active` seeds only (`seed_adam_step`)."""

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """One Adam step of every `active` seed (None: all)."""
        seed_adam_step(self, active)


def stacked_optimizer(params: list[torch.Tensor], optimizers: list[Any]) -> SeedAdam | RMSprop:
    """The optimizer of a seed batch's stacked `params`: the kind, options and state of the
    seeds' own optimizers (`optimizers[k]`, seed k's, a single run's each)."""
    first = getattr(optimizers[0], "built", optimizers[0])
    group = first.param_groups[0]
    if isinstance(first, RMSprop | torch.optim.RMSprop):
        if group["momentum"] or group["centered"] or group["weight_decay"]:
            raise ValueError("a seed batch's RMSprop has no momentum, centering or weight decay")
        stacked: SeedAdam | RMSprop = RMSprop(params, group["lr"], group["alpha"], group["eps"],
                                               seeds=len(optimizers))
    elif isinstance(first, FusedAdam | torch.optim.Adam):
        stacked = SeedAdam(params, group["lr"], group["eps"], group["betas"],
                           seeds=len(optimizers))
    else:
        raise UserError(f"num_seeds > 1 cannot batch a {type(first).__name__} optimizer; "
                        "use num_seeds=1")
    for k, optimizer in enumerate(optimizers):
        stacked.copy_from(k, optimizer)
    return stacked


def per_seed(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`x` `[S]` shaped to broadcast over `like` `[S, ...]`."""
    return x.view(-1, *([1] * (like.dim() - 1)))


def seed_grad_norms(grads: list[torch.Tensor]) -> torch.Tensor:
    """Each seed's global 2-norm `[S]` of stacked `grads` `[S, ...]` (a batch of one: a single
    run's norm, bit for bit)."""
    if grads[0].shape[0] == 1:
        return grad_norm([g[0] for g in grads]).unsqueeze(0)
    norms = torch.stack([torch.linalg.vector_norm(g, dim=tuple(range(1, g.dim())))
                         for g in grads])  # no flatten: Linear weights are strided
    return torch.linalg.vector_norm(norms, dim=0)


@torch.no_grad()
def clip_grad_norm_per_seed(params: list[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Each seed's global gradient norm `[S]` (before clipping) over stacked `params`; when
    `max_norm` is set, each seed's gradients scaled by `clip_scale`, as `clip_grad_norm` does."""
    grads = [p.grad for p in params if p.grad is not None]
    total = seed_grad_norms(grads)
    if max_norm is not None and max_norm > 0:
        scale = clip_scale(max_norm, total)
        for g in grads:
            g.mul_(per_seed(scale, g))
    return total


def _layout(t: torch.Tensor) -> tuple[int, ...]:
    """`t`'s strides, but those of its size-1 dimensions (which address nothing)."""
    return tuple(stride for stride, size in zip(t.stride(), t.shape, strict=True) if size != 1)


def _contiguous_view(t: torch.Tensor) -> torch.Tensor | None:
    """`t`, or its last two dimensions swapped where that view is contiguous; None otherwise."""
    if t.is_contiguous():
        return t
    swapped = t.transpose(-1, -2)
    return swapped if swapped.is_contiguous() else None


def seed_adam_step(opt: FusedAdam, active: list[bool] | None) -> None:
    """One Adam step of every `active` seed (None: all) of a seed batch's `FusedAdam`: torch's
    fused kernel, what each seed's single run steps with, over the stacked tensors while every
    seed is in step (one count), else over the active seeds' own slices with their own counts
    (a KL stop left a seed behind); foreach arithmetic where this torch build has no fused
    kernel (torch < 2.4 on the CPU)."""
    active = [True] * len(opt.steps) if active is None else active
    in_step = all(active) and bool((opt.steps == opt.steps[0]).all())
    seeds = None if in_step else [k for k, on in enumerate(active) if on]
    if seeds == [] or _seed_fused(opt, seeds):
        return
    _seed_foreach(opt, active)


def _seed_live(opt: FusedAdam) -> tuple[list[torch.Tensor], ...]:
    """(params, grads, exp_avgs, exp_avg_sqs) of the stacked parameters that have a gradient."""
    params = [p for p in opt.param_groups[0]["params"] if p.grad is not None]
    states = [opt.state_for(p) for p in params]
    return (params, [p.grad for p in params], [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states])


def _seed_fused(opt: FusedAdam, seeds: list[int] | None) -> bool:
    """The fused kernel over the stacked tensors with one step count (`seeds` None: every seed
    in step), or over the slices of `seeds` with each seed's own count. False where this torch
    build has no such kernel."""
    live = _seed_live(opt)
    if not live[0] or not hasattr(torch, "_fused_adam_"):
        return False
    if seeds is not None:  # per seed: [p[k] for each seed k, for each parameter p]
        live = tuple([t[k] for k in seeds for t in tensors] for tensors in live)
    # the kernel copies a strided tensor to a contiguous one (and back): hand it the contiguous
    # view of each transposed Linear weight (`seeded.stack_seeds`) instead. Adam is elementwise,
    # so that is the same step where a parameter, its gradient and its moments share one layout
    # (autograd gives a leaf its own strides; a gradient set by hand may differ: then foreach).
    # Strides of size-1 dimensions say nothing of the layout: a 1-output head's gradient has
    # others there, and must still take the kernel its single run takes
    if any(len({_layout(t) for t in group}) > 1 for group in zip(*live, strict=True)):
        return False
    views = [[_contiguous_view(t) for t in tensors] for tensors in live]
    if any(v is None for tensors in views for v in tensors):
        return False
    params, grads, ms, vs = views
    device = params[0].device
    # the kernel reads the incremented step, on the parameters' device (as FusedAdam keeps it):
    # one for all when in step, else each seed's own for each of its tensors
    counts = [float(opt.steps[0])] if seeds is None else [float(opt.steps[k]) for k in seeds]
    per_count = len(params) // len(counts)
    steps = [step for c in counts for step in [torch.tensor(c + 1.0, device=device)] * per_count]
    group = opt.param_groups[0]
    try:
        fused_adam_(params, grads, ms, vs, steps, group["lr"], group["betas"], group["eps"])
    except (RuntimeError, NotImplementedError):  # no fused kernel here
        return False
    if seeds is None:
        opt.steps += 1
    else:
        opt.steps[seeds] += 1
    return True


def _seed_foreach(opt: FusedAdam, active: list[bool]) -> None:
    """Adam's arithmetic as foreach calls over the stacked tensors, with per-seed step sizes;
    a seed not `active` keeps its parameters and moments."""
    group = opt.param_groups[0]
    on = torch.tensor(active)
    frozen = [k for k, a in enumerate(active) if not a]
    params, grads, ms, vs = _seed_live(opt)
    kept = [(p[frozen].clone(), m[frozen].clone(), v[frozen].clone())
            for p, m, v in zip(params, ms, vs, strict=True)] if frozen else []
    opt.steps += on.to(opt.steps.dtype)
    beta1, beta2 = group["betas"]
    steps = opt.steps.clamp(min=1.0)  # a frozen seed that never stepped: any value will do
    step_size = (group["lr"] / (1 - beta1 ** steps)).to(torch.float32)
    bias2_sqrt = (1 - beta2 ** steps).sqrt().to(torch.float32)
    step_size, bias2_sqrt = (t.to(params[0].device) for t in (step_size, bias2_sqrt))
    foreach_adam_(params, grads, ms, vs, [per_seed(step_size, m) for m in ms],
                  [per_seed(bias2_sqrt, v) for v in vs], group["betas"], group["eps"])
    for (p0, m0, v0), p, m, v in zip(kept, params, ms, vs, strict=False):
        p[frozen], m[frozen], v[frozen] = p0, m0, v0
