"""Where an algorithm's chance comes from. A single run draws from the process-wide generator on
its device (`Draws`); a seed batch from each seed's own generator (`seed_batch/rng.py` `SeedStreams`:
the same methods, each result with a leading seed dimension `[S, ...]`). An algorithm writes
each draw once, `self.draws.normal(shape)`, and both forms run that line; a single run's draws
are the calls it made before (`torch.randn`, `torch.rand`, ...) in the same order, so its
numbers are unchanged.
"""

from __future__ import annotations

import torch


class Draws:
    """The process-wide generator of `device` (a single run's)."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)

    def normal(self, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
        """Standard normal draws `shape`, as `torch.randn_like` gives them."""
        return torch.randn(tuple(shape), device=self.device)

    def uniform(self, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
        """Uniform [0, 1) draws `shape`, as `torch.rand_like` gives them."""
        return torch.rand(tuple(shape), device=self.device)

    def like(self, kind: str, t: torch.Tensor) -> torch.Tensor:
        """Draws shaped like `t`: "normal" as `torch.randn_like(t)`, "uniform" as
        `torch.rand_like(t)` (a seed batch's `t` is `[S, ...]`: each seed its own)."""
        return self.normal(t.shape) if kind == "normal" else self.uniform(t.shape)

    def randint(self, high: int, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
        """Integers in [0, high) `shape` (long), as `torch.randint_like` gives them."""
        return torch.randint(0, high, tuple(shape), device=self.device)

    def choice(self, masks: torch.Tensor) -> torch.Tensor:
        """One index per row of the bool `masks` `[N, n]`, uniform among its True entries."""
        return torch.multinomial(masks.float(), 1).squeeze(-1)

    def randperm(self, n: int, active: object = None) -> torch.Tensor:
        """A permutation of range(n) (`active`: a seed batch's; a single run always draws)."""
        return torch.randperm(n, device=self.device)
