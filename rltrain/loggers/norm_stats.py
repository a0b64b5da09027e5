"""Scalars of the normalizers' running statistics (`logger.log_norm_stats=true`)."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

from rltrain.envs.normalize import NormalizeObs, ScaleReward
from rltrain.types import Metrics

log = logging.getLogger("rltrain")

MAX_DIMS = 256
"""Per-dimension observation statistics are logged for at most this many (flattened) dims."""
_warned: weakref.WeakSet = weakref.WeakSet()  # normalizers whose truncation was reported


def normalizer_metrics(env: Any) -> Metrics:
    """`norm/*` scalars of the normalization wrappers of `env` (empty when it has none).

    `norm/obs_mean/<i>`, `norm/obs_std/<i>` per observation dimension and `norm/obs_count`;
    `norm/reward_std` (std of the discounted return, by which rewards are divided) and
    `norm/reward_count`.
    """
    out: Metrics = {}
    layer = env
    while layer is not None:
        if isinstance(layer, NormalizeObs):
            out.update(_obs_metrics(layer))
        elif isinstance(layer, ScaleReward):
            out["norm/reward_std"] = float(layer.rms.var.sqrt())
            out["norm/reward_count"] = float(layer.rms.count)
        layer = getattr(layer, "env", None)
    return out


def _obs_metrics(layer: NormalizeObs) -> Metrics:
    """Per dimension `<i>`; for Dict observations per entry and dimension `<key>.<i>`."""
    stats = layer.statistics()
    names = [f"{key}.{i}" if key else str(i)
             for key, rms in stats.items() for i in range(rms.mean.numel())]
    mean = torch.cat([rms.mean.flatten() for rms in stats.values()])
    std = torch.cat([rms.var.flatten() for rms in stats.values()]).sqrt()
    if mean.numel() > MAX_DIMS and layer not in _warned:
        _warned.add(layer)
        log.warning("logger.log_norm_stats: observations have %d dims; logging the first %d",
                    mean.numel(), MAX_DIMS)
    both = torch.stack([mean[:MAX_DIMS], std[:MAX_DIMS]]).cpu().tolist()  # one device sync
    out: Metrics = {f"norm/obs_mean/{n}": m for n, m in zip(names, both[0], strict=False)}
    out.update({f"norm/obs_std/{n}": s for n, s in zip(names, both[1], strict=False)})
    out["norm/obs_count"] = float(next(iter(stats.values())).count)
    return out
