"""Simulator state of gymnasium envs for resume: all or nothing.

A `SyncVectorEnv` is captured only when rltrain can save the whole state of every sub-env:

- the unwrapped env is a gymnasium classic-control or toy-text env (FrozenLake, Taxi,
  CliffWalking, Blackjack: its state is a few numbers, arrays and its numpy Generator; a
  toy-text map and transition table are configuration), or offers the state protocol: `sim_state()` returning plain data
  (numbers, numpy scalars and numeric arrays, tensors, str, None, lists, tuples, str-keyed
  dicts) and `load_sim_state(state)` taking it back; rltrain saves its `np_random` too;
- every wrapper layer (TimeLimit, rltrain's PixelCartPole, your own) holds only such plain
  data, numpy Generators, and configuration (the inner env, spaces, spec, metadata, functions).

Anything else (Box2D, MuJoCo, Atari, an unknown env, a wrapper holding a deque, async vector
envs) is not captured: `capture_problem` says why, and a resumed run restarts its episodes
instead of mixing restored counters with a fresh simulator. `restore` checks that the whole
snapshot fits before it writes anything back. Nothing here stores or restores code: values only.
"""

from __future__ import annotations

import re
import types
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.registration import EnvSpec

from rltrain.errors import UserError
from rltrain.text import first_line

VERSION = 2
"""Snapshots of rltrain 0.1 had no version and could be partial: they are never restored."""
CLASSIC_CONTROL = "gymnasium.envs.classic_control"
TOY_TEXT = "gymnasium.envs.toy_text"
KNOWN = (CLASSIC_CONTROL + ".", TOY_TEXT + ".")
"""Gymnasium's own envs whose whole state is plain attributes (and `np_random`)."""
_TOY_TEXT_CONFIG = frozenset({"desc", "P", "locs", "locs_colors"})
"""FrozenLake's / Taxi's / CliffWalking's map (a bytes array), transition table (a dict keyed
by state numbers) and Taxi's landmarks (lists of tuples, which a checkpoint would give back as
lists): built from the env's arguments, never changed by stepping."""
_CONFIG = frozenset({"env", "_saved_kwargs", "_ezpickle_args", "_ezpickle_kwargs", "spec",
                     "_cached_spec", "metadata", "_metadata", "screen", "clock"})
"""Attributes that are configuration or rendering, not simulator state: never saved."""
_IGNORED = frozenset({"_previous_data"})
"""PassiveEnvChecker's copy of the previous obs and info, only read by its data-reuse check."""
_VECTOR = ("_autoreset_envs",)
"""The one `SyncVectorEnv` attribute carried from step to step (NEXT_STEP autoreset)."""
_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, partial, type)
_DTYPE = re.compile(r"[<>|=]?[biuf][1248]")


class Mismatch(ValueError):
    """A saved snapshot that does not fit the live env (nothing has been written back)."""

# ---- what can be captured -------------------------------------------------------------------

def has_protocol(env: Any) -> bool:
    """True when `env` offers `sim_state()` and `load_sim_state(state)`."""
    return callable(getattr(env, "sim_state", None)) and callable(getattr(env, "load_sim_state", None))


def layers(env: gym.Env) -> list[gym.Env]:
    """`env`, its inner envs, ..., down to the unwrapped env (last)."""
    out = [env]
    while isinstance(out[-1], gym.Wrapper):
        out.append(out[-1].env)
    return out


def capture_problem(venv: gym.vector.VectorEnv) -> str | None:
    """None when `snapshot` captures the whole state of `venv`; else why not (one phrase)."""
    if isinstance(getattr(venv, "capture_problem", None), str):  # a C++ engine says it
        return venv.capture_problem
    if not isinstance(venv, gym.vector.SyncVectorEnv):
        return (f"{type(venv).__name__} keeps its envs in other processes, whose simulator "
                f"state is not saved")
    for env in venv.envs:
        stack = layers(env)
        for layer in stack:
            problem = _layer_problem(layer, layer is stack[-1])
            if problem:
                return problem
    return None


def _layer_problem(layer: Any, unwrapped: bool) -> str | None:
    name = type(layer).__name__
    if unwrapped and has_protocol(layer):
        return None
    if unwrapped and not type(layer).__module__.startswith(KNOWN):
        return (f"simulator state is not saved ({name} from {type(layer).__module__} has no "
                f"sim_state()/load_sim_state())")
    for attr, value in vars(layer).items():
        if not _skipped(attr, value, layer) and not _capturable(value):
            return f"simulator state is not saved ({name}.{attr} is a {type(value).__name__})"
    return None


def _skipped(attr: str, value: Any, layer: Any) -> bool:
    """Configuration, rendering or code: rebuilt identically from the config, never saved."""
    return (attr in _CONFIG or attr in _IGNORED
            or isinstance(value, (gym.Env, gym.Space, EnvSpec, *_CODE))
            or (attr in _TOY_TEXT_CONFIG and type(layer).__module__.startswith(TOY_TEXT + ".")))


def _capturable(value: Any) -> bool:
    return isinstance(value, np.random.Generator) or _plain(value)


def _plain(value: Any) -> bool:
    """Numbers, str, None, numeric numpy values, tensors, and lists/tuples/str-keyed dicts."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (np.generic, np.ndarray)):
        return value.dtype.kind in "biuf"
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


# ---- snapshot ---------------------------------------------------------------------------------

def snapshot(venv: gym.vector.VectorEnv) -> dict[str, Any] | None:
    """The whole state of `venv` as checkpoint data; None when it cannot be captured whole."""
    if capture_problem(venv) is not None:
        return None
    vector = {a: encode(getattr(venv, a)) for a in _VECTOR if hasattr(venv, a)}
    envs = [[_snapshot_layer(layer, layer is stack[-1]) for layer in stack]
            for stack in (layers(e) for e in venv.envs)]
    return {"version": VERSION, "vector": vector, "envs": envs}


def _snapshot_layer(layer: Any, unwrapped: bool) -> dict[str, Any]:
    if unwrapped and has_protocol(layer):
        rng = getattr(layer, "_np_random", None)
        return {"sim_state": encode(layer.sim_state()),
                "np_random": encode(rng) if isinstance(rng, np.random.Generator) else None}
    return {"attrs": {a: encode(v) for a, v in vars(layer).items() if not _skipped(a, v, layer)}}


def encode(value: Any) -> Any:
    """Numpy values as tagged plain data that `decode` turns back into the same dtype; other
    values as they are (the checkpoint's write check refuses what is not plain data)."""
    if isinstance(value, np.random.Generator):
        return {"__generator__": value.bit_generator.state}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"__numpy__": value.dtype.str, "value": value.item()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        native = np.array(value, dtype=value.dtype.newbyteorder("="), order="C")
        return {"__numpy__": value.dtype.str, "array": torch.from_numpy(native)}
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if type(value) in (list, tuple):
        return type(value)(encode(v) for v in value)
    if type(value) is dict:
        return {k: encode(v) for k, v in value.items()}
    return value


def decode(value: Any) -> Any:
    """Invert `encode` (generators stay `{"__generator__": state}`); `Mismatch` if malformed."""
    if isinstance(value, dict) and "__numpy__" in value:
        return _decode_numpy(value)
    if type(value) in (list, tuple):
        return type(value)(decode(v) for v in value)
    if isinstance(value, dict) and "__generator__" not in value:
        return {k: decode(v) for k, v in value.items()}
    return value


def _decode_numpy(value: dict[str, Any]) -> Any:
    name = value["__numpy__"]
    if not isinstance(name, str) or not _DTYPE.fullmatch(name) or len(value) != 2:
        raise Mismatch(f"malformed numpy value {name!r}")
    dtype = np.dtype(name)
    try:
        if isinstance(value.get("array"), torch.Tensor):
            return value["array"].cpu().numpy().astype(dtype)
        if type(value.get("value")) in (bool, int, float):
            return np.array(value["value"]).astype(dtype)[()]
    except (TypeError, ValueError, OverflowError) as exc:
        raise Mismatch(f"numpy value of dtype {name}: {exc}") from None
    raise Mismatch(f"malformed numpy value of dtype {name}")


# ---- restore ----------------------------------------------------------------------------------

def restore(venv: gym.vector.VectorEnv, state: Any) -> str | None:
    """Write a `snapshot` back, all or nothing: None when `venv` now continues exactly where
    the snapshot was taken; else why episodes restart (and nothing was changed)."""
    problem = capture_problem(venv)
    if problem is not None:
        return problem
    if not isinstance(state, dict) or state.get("version") != VERSION:
        return ("the checkpoint holds no complete simulator state (written by an older "
                "rltrain, or by a run whose env could not be saved)")
    try:
        writes = _plan(venv, state)
    except (Mismatch, KeyError, TypeError) as exc:
        return f"the saved simulator state does not fit this env ({first_line(exc)[:160]})"
    for write in writes:
        write()
    return None


def _plan(venv: gym.vector.SyncVectorEnv, state: dict[str, Any]) -> list[Any]:
    """Every write `restore` will do, each checked first: a list of zero-argument callables."""
    envs = state["envs"]
    if not isinstance(envs, list) or len(envs) != len(venv.envs):
        raise Mismatch(f"{len(envs) if isinstance(envs, list) else '?'} envs saved, "
                       f"{len(venv.envs)} here")
    writes = _plan_attrs(venv, state["vector"], _VECTOR, "vector")
    for i, (env, saved) in enumerate(zip(venv.envs, envs, strict=True)):
        stack = layers(env)
        if not isinstance(saved, list) or len(saved) != len(stack):
            raise Mismatch(f"env {i}: another wrapper stack")
        for layer, layer_state in zip(stack, saved, strict=True):
            writes += _plan_layer(layer, layer_state, f"env {i} {type(layer).__name__}")
    return writes


def _plan_layer(layer: Any, saved: Any, where: str) -> list[Any]:
    if not isinstance(saved, dict):
        raise Mismatch(f"{where}: not a dict")
    if "sim_state" in saved and has_protocol(layer):
        writes = [partial(_load_protocol, layer, decode(saved["sim_state"]), where)]
        rng = getattr(layer, "_np_random", None)
        if saved.get("np_random") is not None and isinstance(rng, np.random.Generator):
            writes.append(_plan_generator(rng, saved["np_random"], where))
        return writes
    names = tuple(a for a, v in vars(layer).items() if not _skipped(a, v, layer))
    return _plan_attrs(layer, saved.get("attrs"), names, where)


def _plan_attrs(obj: Any, saved: Any, names: tuple[str, ...], where: str) -> list[Any]:
    """Writes of attributes `names` of `obj`: exactly those must be saved, each fitting."""
    names = tuple(a for a in names if hasattr(obj, a))
    if not isinstance(saved, dict) or set(saved) != set(names):
        have = sorted(saved) if isinstance(saved, dict) else saved
        raise Mismatch(f"{where}: saved attributes {have} are not {sorted(names)}")
    writes = []
    for name in names:
        live = getattr(obj, name)
        if isinstance(live, np.random.Generator):
            writes.append(_plan_generator(live, saved[name], f"{where}.{name}"))
            continue
        value = decode(saved[name])
        if not _fits(live, value):
            raise Mismatch(f"{where}.{name}: a saved {type(value).__name__} does not fit")
        writes.append(partial(setattr, obj, name, value))
    return writes


def _plan_generator(live: np.random.Generator, saved: Any, where: str) -> Any:
    """Write a saved bit-generator state, tried first on a spare generator of the same kind."""
    if not isinstance(saved, dict) or not isinstance(saved.get("__generator__"), dict):
        raise Mismatch(f"{where}: not a saved numpy Generator")
    state = saved["__generator__"]
    try:
        type(live.bit_generator)().state = state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise Mismatch(f"{where}: {first_line(exc)[:160]}") from None
    return partial(setattr, live.bit_generator, "state", state)


def _load_protocol(env: Any, state: Any, where: str) -> None:
    """Hand a decoded `sim_state()` back to the env; its refusal stops the resume."""
    try:
        env.load_sim_state(state)
    except Exception as exc:  # the user's code: any failure is one line, not a traceback
        raise UserError(f"resume: {where}.load_sim_state refused the saved state "
                        f"({type(exc).__name__}: {first_line(exc)[:160]})") from exc


def _fits(live: Any, saved: Any) -> bool:
    """Whether `saved` can stand where `live` stands: numbers for numbers, equal shapes for
    arrays (and dtypes for tensors), same keys and lengths for containers; None stands for a
    number or an array not made yet."""
    if saved is None:  # e.g. CartPole's steps_beyond_terminated: None or a count
        return live is None or _numeric_shape(live) == ()
    if live is None:
        return _numeric_shape(saved) is not None
    if isinstance(live, torch.Tensor):
        return (isinstance(saved, torch.Tensor) and saved.shape == live.shape
                and saved.dtype == live.dtype)
    if isinstance(live, str) or isinstance(saved, str):
        return type(live) is type(saved)
    if type(live) is dict or type(saved) is dict:
        return (type(live) is type(saved) and live.keys() == saved.keys()
                and all(_fits(live[k], saved[k]) for k in live))
    if type(live) in (list, tuple) and type(saved) in (list, tuple):
        return len(live) == len(saved) and all(_fits(a, b) for a, b in zip(live, saved, strict=True))
    shape = _numeric_shape(live)
    return shape is not None and shape == _numeric_shape(saved)


def _numeric_shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a number (()), numeric array or nested numeric sequence; None otherwise."""
    if isinstance(value, (bool, int, float, np.generic, np.ndarray, list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            return None
        return array.shape if array.dtype.kind in "biuf" else None
    return None


