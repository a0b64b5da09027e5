"""A warning when an env's observations fall far outside the finite bounds its Box space declares.

Such a space is wrong (a velocity declared in [-1, 1] that reaches 40), and what trusts it goes
wrong quietly: pixel detection, exported metadata, a user's own scaling. "Far" means beyond a
bound by more than the width of the space (`high - low`) in that dimension, so float round-off
and the small overshoots of clipped physics never warn; dimensions with an infinite bound are
not checked. Each (env, entry) warns once per process, so a run (a seed batch, its evaluations)
says it once.

Cost: the check runs on every vector step for the first `EVERY_STEP_FOR` steps, then on every
`EVERY`-th step, and stops for an entry once it warned. Skipped: uint8 entries (pixels) and
categorical ones (their range is checked exactly in `obs_space.Leaf.tensor`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rltrain.envs.obs_space import Leaf

log = logging.getLogger("rltrain")

EVERY_STEP_FOR = 1_000
"""Vector steps (after each reset) checked one by one: a wrong space shows early."""
EVERY = 1_000
"""After those, one step in this many is checked (a space wrong only once the policy learned)."""
SHOWN_DIMS = 5
"""How many far-out dimensions one warning lists."""

_warned: set[tuple[str, str]] = set()  # (env, entry key) that warned in this process


class _Limits:
    """One entry's limits: values below `low` or above `high` are far out (`-inf`/`inf` where
    a bound is infinite: never)."""

    def __init__(self, index: int, leaf: Leaf):
        space = leaf.space
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        bounded = np.isfinite(low) & np.isfinite(high)
        width = np.where(bounded, high - low, np.inf)
        self.index, self.key = index, leaf.key
        self.declared_low, self.declared_high, self.width = low, high, width
        self.low = np.where(bounded, low - width, -np.inf)
        self.high = np.where(bounded, high + width, np.inf)


def _watched(leaf: Leaf) -> bool:
    """A float Box entry with a dimension bounded on both sides."""
    space = leaf.space
    return (leaf.nvec is None and isinstance(space, gym.spaces.Box) and space.dtype != np.uint8
            and bool(np.any(np.isfinite(space.low) & np.isfinite(space.high))))


class BoundsWatch:
    """Checks the entries' batched observation arrays against their Box bounds (see the module
    docstring) and logs one warning line per (env, entry) that falls far outside."""

    def __init__(self, leaves: Sequence[Leaf], env: str):
        self.env = env
        self.limits = [_Limits(i, leaf) for i, leaf in enumerate(leaves)
                       if _watched(leaf) and (env, leaf.key) not in _warned]
        self.steps = 0

    def reset(self, arrays: Sequence[np.ndarray]) -> None:
        """After a reset: check, and check every step again for a while."""
        self.steps = 0
        self._check(arrays)

    def step(self, arrays: Sequence[np.ndarray]) -> None:
        """After a step: check it if it is one of the checked steps."""
        if not self.limits:
            return
        self.steps += 1
        if self.steps <= EVERY_STEP_FOR or self.steps % EVERY == 0:
            self._check(arrays)

    def _check(self, arrays: Sequence[np.ndarray]) -> None:
        for lim in list(self.limits):
            obs = np.asarray(arrays[lim.index])
            far = (obs < lim.low) | (obs > lim.high)
            if far.any():
                if (self.env, lim.key) not in _warned:  # another env of this run may have
                    self._warn(lim, obs, far)
                self.limits.remove(lim)

    def _warn(self, lim: _Limits, obs: np.ndarray, far: np.ndarray) -> None:
        _warned.add((self.env, lim.key))
        first = tuple(int(i) for i in np.argwhere(far)[0])
        row, dim = first[0], first[1:]
        dims = sorted({tuple(int(i) for i in at[1:]) for at in np.argwhere(far)})
        shown = ", ".join(_dim(d) for d in dims[:SHOWN_DIMS])
        more = f" and {len(dims) - SHOWN_DIMS} more" if len(dims) > SHOWN_DIMS else ""
        value = float(obs[first])
        above = value > lim.high[dim]
        side, bound = ("high", lim.declared_high[dim]) if above else ("low", lim.declared_low[dim])
        entry = f" entry {lim.key!r}" if lim.key else ""
        which = f"dims {shown}{more} are" if len(dims) > 1 else f"dim {shown} is"
        log.warning("env %s: observation%s %s far outside the declared bounds: dim %s = %g (row "
                    "%d), %s %s=%g by more than the space's width %g; its observation_space is "
                    "wrong, fix its low/high (warned once)", self.env, entry, which, _dim(dim),
                    value, row, "above" if above else "below", side, bound, lim.width[dim])


def _dim(index: tuple[int, ...]) -> str:
    """`3` for a vector's dimension, `(1, 2)` for an index of a 2-D or larger entry."""
    return str(index[0]) if len(index) == 1 else str(index)
