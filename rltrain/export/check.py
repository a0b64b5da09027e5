"""Does an export act like the torch policy? Random observations in, actions compared."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from rltrain.envs.normalize import NormalizeObs, RunningMeanStd

BOX_TOLERANCE = 1e-5
"""Largest accepted |Δ| of Box actions, in units of the widest bounded half range (at least 1)."""
WIDE = 1e6
"""Bounds beyond ±WIDE count as unbounded (CartPole's velocities are bounded by float32 max)."""


@dataclass
class Agreement:
    """Result of comparing exported and torch actions on the same observations."""

    ok: bool
    samples: int
    mismatches: int
    """Discrete: observations whose actions differ; Box: those whose |Δ| exceeds the tolerance."""
    max_abs_diff: float
    tolerance: float


def sample_observations(space: gym.Space, norm: NormalizeObs | None, n: int,
                        seed: int) -> np.ndarray | dict[str, np.ndarray]:
    """`n` observations of `space` (see `_sample`); for a Dict space (`observation_space` of
    Dict / Tuple observations) a dict of them, each entry with its own normalizer statistics
    and its own seed."""
    if isinstance(space, gym.spaces.Dict):
        stats = norm.statistics() if norm is not None else {}
        return {key: _sample(sub, stats.get(key), n, seed + i)
                for i, (key, sub) in enumerate(space.spaces.items())}
    return _sample(space, norm.rms if norm is not None else None, n, seed)


def _sample(space: gym.spaces.Box | gym.spaces.MultiDiscrete, rms: RunningMeanStd | None,
            n: int, seed: int) -> np.ndarray:
    """`n` observations. MultiDiscrete (categorical observations): uniform int64 entries.
    uint8 spaces (pixels): uniform uint8 values within the bounds. Else
    float32: a normal around the normalizer's mean with 4× its std when
    there is one (so the ±clip_obs clamp is reached now and then), else a standard normal;
    bounded dimensions are then drawn uniformly within their bounds instead (when there are no
    statistics) or clipped to them."""
    rng = np.random.default_rng(seed)
    shape = (n, *space.shape)
    if isinstance(space, gym.spaces.MultiDiscrete):  # categorical entries: uniform over each
        return rng.integers(0, space.nvec, shape).astype(np.int64)
    if space.dtype == np.uint8:
        low8, high8 = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
        return rng.integers(low8, high8.astype(np.int64) + 1, shape).astype(np.uint8)
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    bounded = (np.abs(low) < WIDE) & (np.abs(high) < WIDE)
    if rms is not None:
        mean = rms.mean.cpu().numpy()
        std = np.sqrt(rms.var.cpu().numpy())
        x = np.clip(mean + 4.0 * std * rng.standard_normal(shape), np.where(bounded, low, -np.inf),
                    np.where(bounded, high, np.inf))
    else:
        uniform = rng.uniform(np.where(bounded, low, 0.0), np.where(bounded, high, 1.0), shape)
        x = np.where(bounded, uniform, rng.standard_normal(shape))
    return x.astype(np.float32)


def compare_actions(exported: np.ndarray, reference: np.ndarray, discrete: bool,
                    action_scale: float = 1.0) -> Agreement:
    """Discrete (and MultiDiscrete, MultiBinary): actions must be identical; Box: |Δ| ≤
    BOX_TOLERANCE × max(1, action_scale)."""
    exported, reference = np.asarray(exported), np.asarray(reference)
    n = len(reference)
    if exported.shape != reference.shape:
        return Agreement(False, n, n, float("inf"), 0.0)
    if discrete:  # a row of a MultiDiscrete/MultiBinary action counts once
        mismatches = int((exported != reference).reshape(n, -1).any(axis=1).sum())
        worst = float(np.abs(exported.astype(np.int64) - reference.astype(np.int64)).max()) if n else 0.0
        return Agreement(mismatches == 0, n, mismatches, worst, 0.0)
    tol = BOX_TOLERANCE * max(1.0, action_scale)
    diff = np.abs(exported.astype(np.float64) - reference.astype(np.float64)).reshape(n, -1)
    worst = float(diff.max()) if diff.size else 0.0
    if not np.isfinite(diff).all():
        worst = float("inf")
    bad = int((~(diff <= tol)).any(axis=1).sum())
    return Agreement(bad == 0, n, bad, worst, tol)
