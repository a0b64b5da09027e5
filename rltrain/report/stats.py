"""Statistics across seeds: interquartile mean, percentile-bootstrap confidence intervals, and
the mean learning curve of a group with its confidence band.

With few seeds, rliable (Agarwal et al. 2021) recommends the interquartile mean with a bootstrap
confidence interval over runs instead of a mean ± std; this is that recipe for one task.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BOOTSTRAP_REPS = 2000
LEVEL = 0.95


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along `axis`: the mean of the middle 50% (scipy's trim_mean(x, 0.25))."""
    x = np.sort(np.asarray(x, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    cut = int(0.25 * n)
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def bootstrap_ci(x: np.ndarray, statistic: Callable[..., np.ndarray] = iqm,
                 reps: int = BOOTSTRAP_REPS, level: float = LEVEL,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap CI of `statistic` over the runs (axis 0) of `x` [runs, ...].

    Runs are resampled with replacement `reps` times; a fixed `seed` makes the report
    reproducible. One run gives a zero-width interval.
    """
    x = np.asarray(x, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(reps, len(x)))
    samples = statistic(x[idx], axis=1)  # [reps, ...]
    tail = 100 * (1 - level) / 2
    return np.percentile(samples, tail, axis=0), np.percentile(samples, 100 - tail, axis=0)


def mean_std(x: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else 0.0


def common_grid(curves: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The steps where every curve is defined: the union of their steps within the overlap."""
    curves = [(s, v) for s, v in curves if len(s)]
    if not curves:
        return np.zeros(0)
    lo = max(s[0] for s, _ in curves)
    hi = min(s[-1] for s, _ in curves)
    steps = np.unique(np.concatenate([s for s, _ in curves]))
    return steps[(steps >= lo) & (steps <= hi)].astype(np.float64)


def mean_curve(curves: list[tuple[np.ndarray, np.ndarray]]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, CI low, CI high) across runs: each curve is interpolated onto the common
    grid, then the mean and its bootstrap confidence band are taken across runs per step."""
    grid = common_grid(curves)
    if not len(grid):
        return grid, grid, grid, grid
    values = np.stack([np.interp(grid, s, v) for s, v in curves if len(s)])  # [runs, steps]
    lo, hi = bootstrap_ci(values, statistic=np.mean)
    return grid, values.mean(axis=0), lo, hi
