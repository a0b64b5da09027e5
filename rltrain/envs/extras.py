"""Env extras (reward components, log scalars) taken out of a gymnasium vector `info`.

A single env reports `info["reward_components"] = {name: float}` and `info["log"] = {key:
float}`; gymnasium's vector envs turn each into `{name: array[N], "_name": mask[N]}`. In
SAME_STEP autoreset mode the info of a row whose episode ended is its reset info, and the
info of the step that ended it sits in `info["final_info"]` (mask `_final_info`): both are
merged here so that last step is not lost.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def vector_extras(info: dict[str, Any], log_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """`{"reward_components": {name: float64[N]}, "log": {key: float64[k]}}` (parts present only).

    Reward components are 0 for rows that did not report one; `log` holds the values of the
    rows that reported them. `log_keys` also takes these top-level keys into `log`. Values that
    are not one number per env (arrays, strings, objects) are skipped.
    """
    final = info.get("final_info")
    if (not log_keys and "reward_components" not in info and "log" not in info
            and (not final or ("reward_components" not in final and "log" not in final))):
        return {}  # the common case, every step: keep it cheap
    ended = info.get("_final_info")
    out: dict[str, Any] = {}
    components = _merge_group(info, final, ended, "reward_components")
    if components:
        out["reward_components"] = {k: np.where(m, v, 0.0) for k, (v, m) in components.items()}
    logs = _merge_group(info, final, ended, "log")
    for key in log_keys:
        merged = _merge(info, final, ended, key)
        if merged is not None:
            logs[key] = merged
    logs = {k: v[m] for k, (v, m) in logs.items() if m.any()}
    if logs:
        out["log"] = logs
    return out


def _merge_group(info: dict, final: dict | None, ended: np.ndarray | None,
                 group: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every numeric column of the nested dict `group`, merged over `info` and `final`."""
    top, fin = info.get(group) or {}, (final or {}).get(group) or {}
    names = [k for k in {**top, **fin} if not str(k).startswith("_")]
    out = {}
    for name in names:
        merged = _merge(top, fin, ended, name)
        if merged is not None:
            out[str(name)] = merged
    return out


def _merge(top: dict, final: dict | None, ended: np.ndarray | None,
           key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(values float64[N], mask[N]) of `key`: the step's own info, or the final info of rows
    that ended. None when `key` is absent or not one number per env."""
    parts = []
    for source, rows in ((top, None if ended is None else ~ended), (final, ended)):
        if source and key in source:
            values = _numeric(source[key])
            if values is None:
                return None
            mask = np.asarray(source.get("_" + key, np.ones(len(values), bool)), dtype=bool)
            parts.append((values, mask if rows is None else mask & rows))
    if not parts:
        return None
    values, mask = parts[0]
    for other, other_mask in parts[1:]:
        if len(other) != len(values):
            return None
        values, mask = np.where(other_mask, other, values), mask | other_mask
    return values, mask


def _numeric(value: Any) -> np.ndarray | None:
    """A 1-D float64 array of one number per env, or None (strings, objects, per-row arrays)."""
    arr = np.asarray(value) if isinstance(value, (np.ndarray, list, tuple)) else None
    if arr is None or arr.ndim != 1 or arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64, copy=False)


def episode_success(info: dict[str, Any], done: np.ndarray) -> np.ndarray | None:
    """`info["is_success"]` of the step that ended each row in `done` (a goal env's, as
    gymnasium-robotics' and SB3's bit-flipping envs report it), float64 `[k]` in the rows' order;
    NaN for an ended row that reported none; None when none of them did (most envs)."""
    final = info.get("final_info")
    if "is_success" not in info and (not final or "is_success" not in final):
        return None
    merged = _merge(info, final, info.get("_final_info"), "is_success")
    if merged is None:
        return None
    values, mask = merged
    if not mask[done].any():
        return None
    return np.where(mask, values, np.nan)[done]


def set_log_keys(env: Any, keys: list[str] | tuple[str, ...]) -> None:
    """Ask every layer of `env` that forwards info keys (`GymVecEnv.log_keys`) to forward `keys`."""
    layer = env
    while layer is not None:
        if hasattr(layer, "log_keys"):
            layer.log_keys = tuple(keys)
        layer = getattr(layer, "env", None)
