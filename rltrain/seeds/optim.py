"""Adam, RMSprop and gradient-norm clipping over parameters stacked `[S, ...]`, per seed: the
bookkeeping of a seed batch (stacked state, per-seed step counts, seeds that sit a step out);
the arithmetic of each step is `algos/optim.py`'s, the one a single run steps with.

Each seed's single run clips its gradients to a global norm and steps its Adam. Here
the same two steps run on all seeds' stacked tensors at once, with the norm, the clip factor and
Adam's step count kept per seed; a seed that is not `active` (its KL stopped its epochs) keeps
its parameters and moments as they were. The state is copied to and from each seed's own
optimizer (`copy_to`, `copy_from`: rltrain's `FusedAdam` / `RMSprop`, or torch's, which keep
state alike), so a seed's checkpoint is its single run's.
"""

from __future__ import annotations

import torch

from rltrain.algos.optim import Optimizer, clip_scale, foreach_adam_, fused_adam_, rmsprop_


def _per_seed(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`x` `[S]` shaped to broadcast over `like` `[S, ...]`."""
    return x.view(-1, *([1] * (like.dim() - 1)))


@torch.no_grad()
def clip_per_seed(params: list[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Each seed's global gradient norm `[S]` (before clipping); when `max_norm` is set,
    scale each seed's gradients by min(1, max_norm / (norm + 1e-6)), as `clip_grad_norm_` does."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g, dim=tuple(range(1, g.dim())))
                         for g in grads])  # no flatten: Linear weights are strided
    total = torch.linalg.vector_norm(norms, dim=0)
    if max_norm is not None and max_norm > 0:
        scale = clip_scale(max_norm, total)
        for g in grads:
            g.mul_(_per_seed(scale, g))
    return total


def _contiguous_view(t: torch.Tensor) -> torch.Tensor | None:
    """`t`, or its last two dimensions swapped where that view is contiguous; None otherwise."""
    if t.is_contiguous():
        return t
    swapped = t.transpose(-1, -2)
    return swapped if swapped.is_contiguous() else None


def set_seed_lr(optimizer: _SeedOptimizer, lr: float) -> None:
    """`set_lr` for a seed batch's optimizer (every seed steps at one rate)."""
    optimizer.lr = lr


class _SeedOptimizer:
    """Per-seed state over stacked leaf tensors, copied to and from each seed's own torch
    optimizer: one stacked tensor per parameter for each name in `STATE` (torch's names), and
    one step count per seed."""

    STATE: tuple[str, ...] = ()

    def __init__(self, params: list[torch.Tensor], optimizers: list[Optimizer]):
        self.params = params
        self.lr: float = optimizers[0].param_groups[0]["lr"]
        self.state = {name: [torch.zeros_like(p) for p in params] for name in self.STATE}
        self.steps = torch.zeros(len(optimizers), dtype=torch.float64)
        for k, opt in enumerate(optimizers):
            self.copy_from(k, opt)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (the algorithms' steps call it as a single run's optimizer)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def copy_to(self, k: int, optimizer: Optimizer) -> None:
        """Seed k's state and step count into its own optimizer (for its checkpoint)."""
        for i, p in enumerate(optimizer.param_groups[0]["params"]):
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state.update({name: torch.zeros_like(p) for name in self.STATE})
            state["step"].fill_(float(self.steps[k]))
            for name in self.STATE:
                state[name].copy_(self.state[name][i][k])
        optimizer.param_groups[0]["lr"] = self.lr

    @torch.no_grad()
    def copy_from(self, k: int, optimizer: Optimizer) -> None:
        """Seed k's state and step count from its own optimizer (fresh: zeros)."""
        for i, p in enumerate(optimizer.param_groups[0]["params"]):
            state = optimizer.state.get(p) or {}
            if self.STATE[0] in state:
                for name in self.STATE:
                    self.state[name][i][k].copy_(state[name])
                self.steps[k] = float(state["step"])


class SeedAdam(_SeedOptimizer):
    """Adam (no weight decay, no amsgrad: what rltrain's algorithms use) over stacked leaf
    tensors, one step count per seed; hyperparameters from the seeds' own optimizers."""

    STATE = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: list[torch.Tensor], optimizers: list[Optimizer]):
        group = optimizers[0].param_groups[0]
        self.betas: tuple[float, float] = group["betas"]
        self.eps: float = group["eps"]
        super().__init__(params, optimizers)
        self.exp_avg, self.exp_avg_sq = self.state["exp_avg"], self.state["exp_avg_sq"]

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """One Adam step of every `active` seed (None: all of them) at `self.lr`: torch's fused Adam kernel, what each
        seed's single run steps with (`FusedAdam`), over the stacked tensors while every seed is
        in step (one step count), else over the active seeds' own slices with their own step
        counts (a KL stop left a seed behind). The foreach path runs where this torch build
        has no fused kernel (torch < 2.4 on the CPU)."""
        active = [True] * len(self.steps) if active is None else active
        in_step = all(active) and bool((self.steps == self.steps[0]).all())
        seeds = None if in_step else [k for k, on in enumerate(active) if on]
        if seeds == [] or self._fused(seeds):
            return
        self._foreach(active)

    def _foreach(self, active: list[bool]) -> None:
        """Adam's arithmetic as foreach calls over the stacked tensors, with per-seed step sizes;
        a seed not `active` keeps its parameters and moments."""
        on = torch.tensor(active)
        frozen = [k for k, a in enumerate(active) if not a]
        kept = [(p[frozen].clone(), m[frozen].clone(), v[frozen].clone())
                for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True)
                ] if frozen else []
        self.steps += on.to(self.steps.dtype)
        beta1, beta2 = self.betas
        steps = self.steps.clamp(min=1.0)  # a frozen seed that never stepped: any value will do
        step_size = (self.lr / (1 - beta1 ** steps)).to(torch.float32)
        bias2_sqrt = (1 - beta2 ** steps).sqrt().to(torch.float32)
        params, grads, ms, vs = self._live()
        step_size, bias2_sqrt = (t.to(params[0].device) for t in (step_size, bias2_sqrt))
        foreach_adam_(params, grads, ms, vs, [_per_seed(step_size, m) for m in ms],
                      [_per_seed(bias2_sqrt, v) for v in vs], self.betas, self.eps)
        for (p0, m0, v0), p, m, v in zip(kept, self.params, self.exp_avg, self.exp_avg_sq,
                                         strict=False):
            p[frozen], m[frozen], v[frozen] = p0, m0, v0

    def _live(self) -> tuple[list[torch.Tensor], ...]:
        """(params, grads, exp_avgs, exp_avg_sqs) of the parameters that have a gradient."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in live]
        return (params, [p.grad for p in params], [self.exp_avg[i] for i in live],
                [self.exp_avg_sq[i] for i in live])

    def _fused(self, seeds: list[int] | None) -> bool:
        """torch's fused Adam kernel over the stacked tensors with one step count (`seeds`
        None: every seed in step), or over the slices of `seeds` with each seed's own count.
        False where this torch build has no such kernel (then the foreach path runs)."""
        live = self._live()
        if not live[0] or not hasattr(torch, "_fused_adam_"):
            return False
        if seeds is not None:  # per seed: [p[k] for each seed k, for each parameter p]
            live = tuple([t[k] for k in seeds for t in tensors] for tensors in live)
        # the kernel copies a strided tensor to a contiguous one (and back): hand it the
        # contiguous view of each transposed Linear weight (`stacked.stack_seeds`) instead. Adam
        # is elementwise, so that is the same step where a parameter, its gradient and its
        # moments share one layout (autograd gives a leaf its own strides; a gradient set by
        # hand may differ: then the foreach path runs)
        if any(len({t.stride() for t in group}) > 1 for group in zip(*live, strict=True)):
            return False
        views = [[_contiguous_view(t) for t in tensors] for tensors in live]
        if any(v is None for tensors in views for v in tensors):
            return False
        params, grads, ms, vs = views
        device = params[0].device
        # the kernel reads the incremented step, on the parameters' device (as FusedAdam keeps
        # it): one for all when in step, else each seed's own for each of its tensors
        counts = [float(self.steps[0])] if seeds is None else [float(self.steps[k]) for k in seeds]
        per_count = len(params) // len(counts)
        steps = [step for c in counts
                 for step in [torch.tensor(c + 1.0, device=device)] * per_count]
        try:
            fused_adam_(params, grads, ms, vs, steps, self.lr, self.betas, self.eps)
        except (RuntimeError, NotImplementedError):  # no fused kernel here
            return False
        if seeds is None:
            self.steps += 1
        else:
            self.steps[seeds] += 1
        return True


class SeedRMSprop(_SeedOptimizer):
    """RMSprop as `torch.optim.RMSprop` (and rltrain's `RMSprop`) with its defaults beyond `alpha` and `eps` (no momentum,
    not centered, no weight decay: what A2C uses) over stacked leaf tensors, per seed."""

    STATE = ("square_avg",)

    def __init__(self, params: list[torch.Tensor], optimizers: list[Optimizer]):
        group = optimizers[0].param_groups[0]
        if group["momentum"] or group["centered"] or group["weight_decay"]:
            raise ValueError("SeedRMSprop: momentum, centered and weight decay are not batched")
        self.alpha: float = group["alpha"]
        self.eps: float = group["eps"]
        super().__init__(params, optimizers)

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """One RMSprop step of every seed (A2C takes one per rollout: all are `active`)."""
        if active is not None and not all(active):
            raise ValueError("SeedRMSprop steps every seed together")
        self.steps += 1
        live = [(p, v) for p, v in zip(self.params, self.state["square_avg"], strict=True)
                if p.grad is not None]
        rmsprop_([p for p, _ in live], [p.grad for p, _ in live], [v for _, v in live],
                 self.lr, self.alpha, self.eps)
