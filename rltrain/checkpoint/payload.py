"""The checkpoint payload schema: the one place that says what each field of a checkpoint holds.

Every reader checks a loaded payload here before using it (`checkpoint.load(require=...)`):
`config` always, plus the parts its command needs (`EVAL` for eval and export, `RESUME` for
`resume=`). Fields that are present are type-checked even when not required; unknown keys are
ignored (a newer rltrain may add some). A missing or mistyped field is one `UserError` line,
e.g. `run/checkpoints/latest.pt: checkpoint field counters.global_step is a str, expected int`.
The network sizes the config declares are compared with the stored weights, so a checkpoint
cannot make rltrain build a network far bigger than the one it holds (`check_sizes`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from rltrain.buffers.choice import BadState, saved_replay_class
from rltrain.errors import UserError

EVAL = ("config", "algo")
"""What `rltrain eval` and `rltrain export` read (and `env`'s normalizer statistics, if any)."""
RESUME = ("config", "algo", "env", "counters", "schedule", "loop", "rng", "metrics")
"""What `resume=` reads (`replay` too when the run saved its buffer)."""

Check = Callable[[Any, str, bool], None]
"""`check(value, key, strict)`: raise `_Bad`; `strict` makes the fields of a record required."""


class _Bad(Exception):
    """One field that is wrong: `args = (key, what is wrong)`."""


def check_payload(payload: dict[str, Any], path: str | os.PathLike,
                  require: tuple[str, ...] = ()) -> None:
    """Raise a one-line `UserError` for the first missing (required) or mistyped field."""
    try:
        for name, check in FIELDS.items():
            if name in payload:
                check(payload[name], name, name in require)
            elif name in ("format_version", "config", *require):
                raise _Bad(name, "is missing")
    except _Bad as bad:
        key, what = bad.args
        raise UserError(f"{path}: checkpoint field {key} {what}") from None
    check_sizes(payload, path)


# ---- field checks --------------------------------------------------------------------------

def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} tensor"
    return "None" if value is None else type(value).__name__


def _typed(expected: str, *types: type) -> Check:
    """Exactly one of `types` (so a bool is not an int)."""
    def check(value: Any, key: str, strict: bool) -> None:
        if type(value) not in types:
            raise _Bad(key, f"is a {_kind(value)}, expected {expected}")
    return check


def _int(low: int | None = None, high: int | None = None) -> Check:
    def check(value: Any, key: str, strict: bool) -> None:
        _typed("int", int)(value, key, strict)
        if (low is not None and value < low) or (high is not None and value > high):
            span = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise _Bad(key, f"is {value}, expected an int {span}")
    return check


_NUMBER = _typed("float", int, float)
_DICT = _typed("dict", dict, OrderedDict)


def _tensor(kind: str = "", shape: tuple[int, ...] | None = None, ndim: int | None = None) -> Check:
    """A tensor; `kind` "float" (floating), "int" (integer) or "byte" (uint8)."""
    def check(value: Any, key: str, strict: bool) -> None:
        if not isinstance(value, torch.Tensor):
            raise _Bad(key, f"is a {_kind(value)}, expected a tensor")
        ok = {"": True, "float": value.is_floating_point(), "byte": value.dtype == torch.uint8,
              "int": not value.is_floating_point() and not value.is_complex()}[kind]
        if not ok:
            raise _Bad(key, f"is a {value.dtype} tensor, expected a {kind} tensor")
        if (shape is not None and tuple(value.shape) != shape) or (
                ndim is not None and value.dim() != ndim):
            want = list(shape) if shape is not None else f"{ndim}-d"
            raise _Bad(key, f"has shape {list(value.shape)}, expected {want}")
    return check


def _list(item: Check, length: int | None = None, *types: type) -> Check:
    def check(value: Any, key: str, strict: bool) -> None:
        _typed("list", *(types or (list,)))(value, key, strict)
        if length is not None and len(value) != length:
            raise _Bad(key, f"has {len(value)} items, expected {length}")
        for i, v in enumerate(value):
            item(v, f"{key}[{i}]", strict)
    return check


def _mapping(item: Check) -> Check:
    def check(value: Any, key: str, strict: bool) -> None:
        _DICT(value, key, strict)
        for k, v in value.items():
            item(v, f"{key}.{k}", strict)
    return check


def _record(fields: dict[str, Check], optional: tuple[str, ...] = ()) -> Check:
    """A dict with these fields (all required when `strict`, except `optional`)."""
    def check(value: Any, key: str, strict: bool) -> None:
        _DICT(value, key, strict)
        for name, sub in fields.items():
            if name in value:
                sub(value[name], f"{key}.{name}", strict)
            elif strict and name not in optional:
                raise _Bad(f"{key}.{name}", "is missing")
    return check


def _either(*checks: Check) -> Check:
    """The first check passes (`None | float`, ...); else the error of the last one."""
    def check(value: Any, key: str, strict: bool) -> None:
        for c in checks[:-1]:
            try:
                return c(value, key, strict)
            except _Bad:
                pass
        checks[-1](value, key, strict)
    return check


def _replay(value: Any, key: str, strict: bool) -> None:
    """The saved replay buffer, as its class declares it (`STATE`, `check_state`:
    `buffers/choice.py`): the uniform ring's rows, or the frame replay's rings."""
    _DICT(value, key, strict)
    cls = saved_replay_class(value)
    _record({name: _KINDS[kind[0]](*kind[1:]) for name, kind in cls.STATE.items()})(
        value, key, True)
    try:
        cls.check_state(value)
    except BadState as bad:
        field, what = bad.args
        raise _Bad(f"{key}.{field}", what) from None


def _eval_result(value: Any, key: str, strict: bool) -> None:
    """The last evaluation: numbers and lists; with `step`, what the runner reads back."""
    _mapping(_either(_NUMBER, _list(_NUMBER)))(value, key, strict)
    if "step" in value:
        _record({"step": _int(0), "mean_reward": _NUMBER, "std_reward": _NUMBER,
                 "episodes": _int(0)})(value, key, True)


_PYTHON_WORD = _int(0, 2**32 - 1)


def _python_rng(value: Any, key: str, strict: bool) -> None:
    """`random.getstate()`: (3, 625 words, the last one a position <= 624, gauss or None)."""
    _typed("tuple", tuple, list)(value, key, strict)
    if len(value) != 3:
        raise _Bad(key, f"has {len(value)} items, expected 3")
    _int(3, 3)(value[0], f"{key}[0]", strict)
    _list(_PYTHON_WORD, 625, tuple, list)(value[1], f"{key}[1]", strict)
    _int(0, 624)(value[1][-1], f"{key}[1][624]", strict)
    _either(_typed("None", type(None)), _NUMBER)(value[2], f"{key}[2]", strict)


_RMS = _record({"mean": _tensor("float"), "var": _tensor("float"), "count": _NUMBER})
_OBS = _either(_mapping(_tensor()), _tensor())
"""Observations: one tensor, or one per entry of a Dict / Tuple observation."""
_KINDS: dict[str, Callable[..., Check]] = {
    "obs": lambda: _OBS, "int": _int,
    "tensor": lambda kind="", ndim=None: _tensor(kind, ndim=ndim)}
"""The field kinds a replay's `STATE` declares, and their checks."""

FIELDS: dict[str, Check] = {
    "format_version": _int(1),
    "config": _DICT,
    "algo": _DICT,
    "env": _record({"obs_rms": _either(_mapping(_RMS), _RMS), "ret_rms": _RMS, "running_return": _tensor("float", ndim=1),
                    "episode_return": _tensor("float", ndim=1),
                    "episode_length": _tensor("int", ndim=1),
                    "sim": _either(_typed("None", type(None)), _DICT), "native": _DICT,
                    "info_mask": _tensor(ndim=2)},
                   optional=("obs_rms", "ret_rms", "running_return", "episode_return",
                             "episode_length", "sim", "native", "info_mask")),
    "counters": _record({"global_step": _int(0), "iteration": _int(0), "best_eval": _NUMBER}),
    "schedule": _record({"eval": _int(), "ckpt": _int(), "log": _int()}),
    "loop": _record({"obs": _OBS, "episode_returns": _list(_NUMBER),
                     "episode_lengths": _list(_int(0)), "episode_counts": _list(_int(0), 2),
                     "metrics": _mapping(_NUMBER)}),
    "rng": _record({"torch": _tensor("byte", shape=tuple(torch.get_rng_state().shape)),
                    "numpy": _record({"keys": _tensor("int", shape=(624,)), "pos": _int(0, 624),
                                      "has_gauss": _int(0, 1), "cached_gaussian": _NUMBER}),
                    "python": _python_rng, "cuda": _list(_tensor("byte", ndim=1))},
                   optional=("cuda",)),
    "metrics": _eval_result,
    "replay": _replay,
    "world": _record({"size": _int(1), "ranks": _list(_record({
        "env": _DICT, "loop": _DICT, "rng": _DICT, "algo": _DICT}))}),
}
"""Every field a checkpoint may hold, in the order they are checked."""


# ---- shapes against the env a run resumes with ---------------------------------------------

def check_fits(payload: dict[str, Any], spec: Any, replay: Any, path: str | os.PathLike) -> None:
    """Refuse a resume payload whose last observation or replay buffer has other shapes than
    the env (`EnvSpec`) and `replay` (the run's, rebuilt; None for on-policy) need."""
    rows = {**_obs_rows("loop.obs", payload["loop"]["obs"], spec, (spec.num_envs,))}
    saved = payload.get("replay")
    if saved is not None and replay is not None:
        if saved["size"] > replay.capacity:
            raise UserError(f"{path}: checkpoint field replay.size is {saved['size']:,}, more "
                            f"than the buffer holds (algo.buffer_size={replay.capacity:,})")
        rows.update({f"replay.{name}": row for name, row in
                     type(replay).fit_rows(saved, spec, _replay_obs_rows).items()})
    for key, (value, shape) in rows.items():
        if value is None:
            raise UserError(f"{path}: checkpoint field {key} does not fit this env: {shape}")
        if tuple(value.shape) != tuple(shape):
            raise UserError(f"{path}: checkpoint field {key} has shape {list(value.shape)}, "
                            f"expected {list(shape)} for this env")


def _replay_obs_rows(name: str, saved: Any, spec: Any, lead: tuple[int, ...]) -> dict[str, tuple]:
    """`_obs_rows` for a replay's observation field `name` (its keys under `replay.`)."""
    return {key.removeprefix("replay."): row
            for key, row in _obs_rows(f"replay.{name}", saved, spec, lead).items()}


def _obs_rows(key: str, saved: Any, spec: Any, lead: tuple[int, ...]) -> dict[str, tuple]:
    """(saved tensor, expected shape) per observation entry of `spec` under `key`; None for a
    saved value of the wrong form (one tensor for a Dict observation, or the reverse)."""
    entries = tuple(getattr(spec, "obs_entries", ()))
    if not entries:
        if isinstance(saved, dict):
            return {key: (None, "saved per entry of a Dict observation; this env has one tensor")}
        return {key: (saved, (*lead, *spec.obs_shape))}
    if not isinstance(saved, dict):
        return {key: (None, "saved as one tensor; this env's observations are a Dict")}
    out = {f"{key}.{e.key}": (saved.get(e.key), (*lead, *e.obs_shape)) for e in entries}
    for k, (value, _) in list(out.items()):
        if value is None:
            out[k] = (None, "this env has that entry, the checkpoint does not")
    extra = sorted(set(saved) - {e.key for e in entries})
    if extra:
        out[f"{key}.{extra[0]}"] = (None, "the checkpoint has that entry, this env does not")
    return out


# ---- declared network sizes against the stored weights ------------------------------------

def check_sizes(payload: dict[str, Any], path: str | os.PathLike) -> None:
    """Refuse a config whose hidden layers need more weights than `algo` stores, before any
    network is built (a `hidden_sizes: [1000000000]` would otherwise allocate gigabytes)."""
    config, algo = payload.get("config"), payload.get("algo")
    if not isinstance(config, dict) or not isinstance(algo, dict):
        return
    lists = _declared_hidden(config)
    if not lists:
        return
    need = min(_least_weights(widths) for widths in lists)
    stored = _count_numbers(algo)
    if need > stored:
        shown = min(lists, key=_least_weights)
        raise UserError(f"{path}: checkpoint config declares hidden layers {shown} (at least "
                        f"{need:,} weights) but stores {stored:,} numbers in algo: the config "
                        f"does not match the weights")


def _declared_hidden(config: dict[str, Any]) -> list[list[int]]:
    """The actor and critic hidden widths the config asks for (unreadable ones left out)."""
    algo = config.get("algo")
    if not isinstance(algo, dict):
        return []
    net = algo.get("net") if isinstance(algo.get("net"), dict) else {}
    base = net.get("hidden") or algo.get("hidden_sizes")
    found = [net.get("actor_hidden") or base, net.get("critic_hidden") or base]
    return [w for w in found if isinstance(w, list) and all(type(x) is int and x > 0 for x in w)]


def _least_weights(widths: list[int]) -> int:
    """A lower bound on the parameters of any MLP with these hidden widths: their biases and
    the hidden-to-hidden weight matrices (inputs and outputs add more)."""
    return sum(widths) + sum(a * b for a, b in zip(widths, widths[1:], strict=False))


def _count_numbers(tree: Any) -> int:
    """How many numbers the tensors below `tree` hold."""
    if isinstance(tree, torch.Tensor):
        return tree.numel()
    if isinstance(tree, dict):
        return sum(_count_numbers(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return sum(_count_numbers(v) for v in tree)
    return 0
