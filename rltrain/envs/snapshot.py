"""Plain-data snapshots of gymnasium env state, so a resumed run continues mid-episode exactly.

A snapshot holds, for every wrapper layer of every sub-env, the attributes that are plain data
(numbers, bools, None, numeric arrays) plus the env's numpy Generator state. That is the whole
state of the classic-control envs and of most simple envs; envs whose state lives elsewhere
(native handles, subprocesses) resume from a reset instead, which is still correct, just not
bit-for-bit. Nothing here stores or restores code: only values are written back.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

_SCALARS = (bool, int, float, type(None))


def _to_plain(value: Any) -> tuple[bool, Any]:
    if isinstance(value, _SCALARS):
        return True, value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return True, value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return True, {"array": torch.from_numpy(np.ascontiguousarray(value)).clone(),
                      "dtype": value.dtype.str}
    return False, None


def _from_plain(value: Any) -> Any:
    if isinstance(value, dict) and "array" in value:
        return value["array"].numpy().astype(np.dtype(value["dtype"]))
    return value


def _layers(env: gym.Env) -> list[Any]:
    layers = [env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers


def _snapshot_object(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        ok, plain = _to_plain(value)
        if ok:
            out[name] = plain
        elif isinstance(value, np.random.Generator):
            out[name] = {"bit_generator": value.bit_generator.state}
    return out


def _restore_object(obj: Any, state: dict[str, Any]) -> None:
    for name, value in state.items():
        if isinstance(value, dict) and "bit_generator" in value:
            getattr(obj, name).bit_generator.state = value["bit_generator"]
        elif hasattr(obj, name):
            setattr(obj, name, _from_plain(value))


def snapshot(venv: gym.vector.VectorEnv) -> dict[str, Any] | None:
    """State of a `SyncVectorEnv` and its sub-envs as plain data; None for other vector envs."""
    if not isinstance(venv, gym.vector.SyncVectorEnv):
        return None
    return {"vector": _snapshot_object(venv),
            "envs": [[_snapshot_object(layer) for layer in _layers(e)] for e in venv.envs]}


def restore(venv: gym.vector.VectorEnv, state: dict[str, Any] | None) -> bool:
    """Write a `snapshot` back; False (nothing changed) when it does not fit this vector env."""
    if state is None or not isinstance(venv, gym.vector.SyncVectorEnv):
        return False
    if len(state["envs"]) != len(venv.envs):
        return False
    _restore_object(venv, state["vector"])
    for env, layer_states in zip(venv.envs, state["envs"], strict=True):
        for layer, layer_state in zip(_layers(env), layer_states, strict=False):
            _restore_object(layer, layer_state)
    return True
