"""Batch Renormalization (Ioffe 2017, https://arxiv.org/abs/1702.03275), as CrossQ uses it:
SBX's `BatchRenorm` (`sbx/common/jax_layers.py`, adapted from flax's BatchNorm), written once
for a plain layer `[B, F]` and for an ensemble of `members` critics `[n, B, F]` (each member
its own statistics, scale and shift).

In train mode a call normalizes with the batch's statistics (mean μ_B and biased variance σ²_B
over the rows, dimension -2) and updates the running ones, `running ← momentum · running +
(1 − momentum) · batch` (flax's convention: momentum 0.99 keeps 99%). Once `steps` (train-mode
calls so far) reaches `warmup_steps`, the batch statistics are corrected towards the running
ones (μ_R, σ²_R) by r = clip(σ_B / σ_R, 1/r_max, r_max) and d = clip((μ_B − μ_R) / σ_R, −d_max,
d_max), both without gradient (σ = sqrt(var + eps)): the layer normalizes with mean
μ_B − d √σ²_B / r and variance σ²_B / r², i.e. ((x − μ_B) / σ_B) r + d. Before the warmup it is a
plain BatchNorm. In eval mode it normalizes with the running statistics and updates nothing.
Every output is `(x − mean) / sqrt(var + eps) · weight + bias`.

The running statistics and the step count are buffers: checkpoints and `polyak_update` carry
them. A seed batch cannot stack this layer (`nets/seeded.py` `check_stackable` refuses it): its
seeds run in turn.
"""

from __future__ import annotations

import torch
from torch import nn

R_MAX = 3.0
"""Upper clip of the scale correction r (lower: 1 / R_MAX); SBX's `r_max`."""
D_MAX = 5.0
"""Clip of the shift correction |d|; SBX's `d_max`."""
_TINY_VAR = 1e-12
"""√σ²_B of the shift term is taken of at least this: a feature constant over the batch (a
ReLU dead for every row) has σ²_B = 0, where √'s gradient is infinite (0 · ∞ = NaN)."""


class BatchRenorm(nn.Module):
    """Batch renormalization over the rows (dimension -2) of `[..., B, dim]`; `members` > 0: an
    ensemble's `[members, B, dim]`, each member with its own statistics and affine parameters."""

    def __init__(self, dim: int, momentum: float = 0.99, warmup_steps: int = 100_000,
                 eps: float = 1e-3, members: int = 0):
        super().__init__()
        shape = (members, 1, dim) if members else (dim,)
        self.momentum, self.warmup_steps, self.eps = float(momentum), int(warmup_steps), eps
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))
        self.register_buffer("running_mean", torch.zeros(shape))
        self.register_buffer("running_var", torch.ones(shape))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def extra_repr(self) -> str:
        return (f"{tuple(self.weight.shape)}, momentum={self.momentum}, "
                f"warmup_steps={self.warmup_steps}, eps={self.eps}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return self._affine(x, self.running_mean, self.running_var)
        mean = x.mean(-2, keepdim=True)
        var = x.var(-2, keepdim=True, correction=0)
        with torch.no_grad():
            running_std = (self.running_var + self.eps).sqrt()
            r = ((var + self.eps).sqrt() / running_std).clamp(1.0 / R_MAX, R_MAX)
            d = ((mean - self.running_mean) / running_std).clamp(-D_MAX, D_MAX)
            # blended, not branched: which branch applies would cost a host sync per call
            warm = (self.steps >= self.warmup_steps).to(x.dtype)
        renorm_mean = mean - d * var.clamp_min(_TINY_VAR).sqrt() / r
        renorm_var = var / r.square()
        used_mean = warm * renorm_mean + (1.0 - warm) * mean
        used_var = warm * renorm_var + (1.0 - warm) * var
        with torch.no_grad():
            self.running_mean.lerp_(mean.view_as(self.running_mean), 1.0 - self.momentum)
            self.running_var.lerp_(var.view_as(self.running_var), 1.0 - self.momentum)
            self.steps += 1
        return self._affine(x, used_mean, used_var)

    def _affine(self, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """(x − mean) / sqrt(var + eps) · weight + bias."""
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


def batch_renorm(dim: int, settings: tuple[float, int] | None,
                 members: int = 0) -> list[nn.Module]:
    """`[BatchRenorm(dim)]` with `settings` = (momentum, warmup steps) (`NetSpec.batch_renorm`),
    or `[]` without them: what a network builder appends."""
    if settings is None:
        return []
    return [BatchRenorm(dim, settings[0], settings[1], members=members)]
