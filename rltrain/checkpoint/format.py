"""Checkpoints: a plain dict of tensors and plain data, verified, written atomically, loaded
weights-only.

Payload keys: `format_version`, `config` (the resolved config as a plain dict), `algo` (networks
and optimizers), `env` (normalizer statistics, and episode state where it can be saved whole),
`counters` (global_step, iteration, best_eval), `schedule`, `loop`, `rng` (torch, numpy and
python generator states), `metrics` (last eval result), `replay` (optional).
`rltrain/checkpoint/payload.py` is the one description of their types; every reader goes through it.

What a checkpoint may contain is what `torch.load(weights_only=True)` reads back: tensors,
Python bool/int/float/str/None, lists, tuples and dicts (str or int keys: optimizer states key
parameters by index). `save` converts numpy scalars (`.item()`) and numeric numpy arrays
(tensors) and refuses anything else with one line naming the key, before a byte is written.
Loading never imports or calls anything named in the file; the one exception is numeric numpy
scalars, which rltrain 0.1 wrote by mistake (see `rltrain/checkpoint/legacy_numpy.py`).
"""

from __future__ import annotations

import os
import random
import re
import socket
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain.checkpoint import checksum
from rltrain.checkpoint.finite import check_finite, first_nonfinite
from rltrain.checkpoint.legacy_numpy import NUMPY_SCALAR_GLOBALS
from rltrain.checkpoint.payload import RESUME, check_payload
from rltrain.checkpoint.run_dir import LATEST, PERIODIC_GLOB, RunDir
from rltrain.errors import TrainingError, UserError

FORMAT_VERSION = 1


def rng_state() -> dict[str, Any]:
    """The torch, numpy and python RNG states as weights-only-loadable data; the CUDA
    generators' too once this process uses CUDA (asking for them starts CUDA on every GPU of
    the machine: a CPU run, or an evaluation from Python, on a shared GPU node took memory on
    each of its GPUs)."""
    legacy = np.random.get_state()
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    state["numpy"] = {"keys": torch.from_numpy(legacy[1].astype(np.int64)), "pos": int(legacy[2]),
                      "has_gauss": int(legacy[3]), "cached_gaussian": float(legacy[4])}
    state["python"] = random.getstate()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore `rng_state()`.

    RNG states must be CPU byte tensors; a checkpoint loaded with `map_location="cuda"` (resume
    on a GPU) brings them onto the GPU, hence the `.cpu()`s.
    """
    torch.set_rng_state(state["torch"].cpu())
    np_state = state["numpy"]
    np.random.set_state(("MT19937", np_state["keys"].cpu().numpy().astype(np.uint32), np_state["pos"],
                         np_state["has_gauss"], np_state["cached_gaussian"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in state["cuda"]])


def save(payload: dict[str, Any], path: str | os.PathLike) -> Path:
    """Verify `payload` (`verify`), then write it with its checksum to `path` atomically: temp
    file in the same folder, fsync, rename. A payload that fails verification writes nothing:
    the previous file at `path` stays as it was."""
    path = Path(path)
    data = verify({"format_version": FORMAT_VERSION, **payload})
    data = {checksum.KEY: checksum.digest(data), **data}  # first: see checkpoint/checksum.py
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_temp_prefix(path)}{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a failed write (full disk, interrupt) leaves no temp file
        tmp.unlink(missing_ok=True)
        raise
    _remove_stale_temps(path)
    return path


def verify(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` as weights-only-loadable data (`to_plain`), checked finite (`check_finite`)."""
    data = to_plain(payload)
    check_finite(data)
    return data


# ---- plain data: what weights-only loading reads back ----------------------------------------

_SCALARS = frozenset({bool, int, float, str, type(None)})
_LEAVES = _SCALARS | {torch.Tensor, torch.nn.Parameter}
_KEYS = frozenset({str, int})
_NUMERIC = "biuf"  # numpy dtype kinds: bool, int, unsigned int, float


class _NotPlain(Exception):
    """A value `to_plain` cannot store; `path` collects its keys, innermost first."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what, self.path = what, []


def to_plain(value: Any) -> Any:
    """`value` with numpy scalars turned into Python numbers and numeric numpy arrays into
    tensors; `TrainingError` naming the key path of anything else that is not plain data."""
    try:
        return _plain(value)
    except _NotPlain as exc:
        raise TrainingError(f"checkpoint payload {_refusal(exc)}; nothing was written (the "
                            f"previous checkpoint is kept)") from None


def plain_problem(value: Any) -> str | None:
    """None when a checkpoint can hold `value`; else what `to_plain` would refuse, as
    `<key path>: <what>` (e.g. `sim.hist: collections.deque is not plain data`)."""
    try:
        _plain(value)
    except _NotPlain as exc:
        return _refusal(exc)
    return None


def _refusal(exc: _NotPlain) -> str:
    return f"{_key_path(reversed(exc.path)) or '<root>'}: {exc.what}"


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _LEAVES:
        return value
    if isinstance(value, np.generic) and value.dtype.kind in _NUMERIC + "U":
        return value.item()
    if kind is np.ndarray and value.dtype.kind in _NUMERIC:
        # a C-ordered, writable copy in native byte order: what torch.from_numpy accepts
        return torch.from_numpy(np.array(value, dtype=value.dtype.newbyteorder("="), order="C"))
    if kind is list or kind is tuple:
        if _LEAVES.issuperset(map(type, value)):  # e.g. python's RNG state: 625 ints
            return value
        return kind(_child(v, i) for i, v in enumerate(value))
    if kind is dict or kind is OrderedDict:
        if not _KEYS.issuperset(map(type, value)):
            bad = next(k for k in value if type(k) not in _KEYS)
            raise _NotPlain(f"key {bad!r} is a {_describe(bad)}, not a str")
        if _LEAVES.issuperset(map(type, value.values())):  # e.g. a module's state_dict
            return value
        return kind((k, _child(v, k)) for k, v in value.items())
    raise _NotPlain(f"{_describe(value)} is not plain data")


def _child(value: Any, key: str | int) -> Any:
    """`_plain(value)`, adding `key` to the path of a refusal."""
    try:
        return _plain(value)
    except _NotPlain as exc:
        exc.path.append(key)
        raise


def _key_path(keys: Any) -> str:
    """`algo`, `policy`, `w` -> `algo.policy.w`; int keys (list items, optimizer state) `[0]`."""
    out = ""
    for k in keys:
        out = f"{out}[{k}]" if isinstance(k, int) else (f"{out}.{k}" if out else str(k))
    return out


def _describe(value: Any) -> str:
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    if isinstance(value, (np.ndarray, np.generic)):
        return f"{name} of dtype {value.dtype}"
    return name


def _temp_prefix(path: Path) -> str:
    """`.<name>.tmp-<host>-`: the host keeps writers on a shared filesystem apart."""
    return f".{path.name}.tmp-{socket.gethostname()}-"


def _remove_stale_temps(path: Path) -> None:
    """Delete temp files of `path` left by writers of this host that died mid-save (SIGKILL,
    OOM): nothing else would, and with `checkpoint.save_buffer` each can be gigabytes."""
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there
        return
    prefix = _temp_prefix(path)
    try:
        for tmp in path.parent.iterdir():
            pid = tmp.name[len(prefix):] if tmp.name.startswith(prefix) else ""
            if pid.isdigit() and not _alive(int(pid)):
                tmp.unlink(missing_ok=True)
    except OSError:  # cleanup is best effort: the checkpoint itself is already written
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def resolve(path: str | os.PathLike) -> Path:
    """A checkpoint file, or a run directory's `checkpoints/latest.pt`."""
    p = Path(path).expanduser()
    if p.is_dir():
        for candidate in (RunDir(p).latest, p / LATEST):  # a run folder or its checkpoints/
            if candidate.is_file():
                return candidate
        raise UserError(f"no checkpoints/latest.pt under {p}: pass a .pt file or a run directory")
    if not p.exists():
        raise UserError(f"checkpoint {p} does not exist")
    if not p.is_file():  # a FIFO or a device would block the read forever
        raise UserError(f"checkpoint {p} is not a regular file: pass a .pt file or a run directory")
    return p


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu",
         require: tuple[str, ...] = ()) -> dict[str, Any]:
    """Load a checkpoint, check its checksum (`checkpoint/checksum.py`; returned without it) and
    its fields (`rltrain.checkpoint.payload.check_payload`: `config` always, plus the parts in
    `require`), and for readers of `algo` that its weights are finite; any unreadable, foreign,
    malformed or damaged file is a one-line `UserError`."""
    p = resolve(path)
    try:
        with torch.serialization.safe_globals(NUMPY_SCALAR_GLOBALS):
            payload = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as exc:  # whatever a foreign or damaged file raises: one line
        raise UserError(f"{p} is not a readable rltrain checkpoint ({_why(exc, p)})") from exc
    if not isinstance(payload, dict) or "format_version" not in payload or "config" not in payload:
        raise UserError(f"{p} is not an rltrain checkpoint (no format_version/config)")
    version = payload["format_version"]
    if type(version) is int and version > FORMAT_VERSION:  # its fields may differ: say so first
        raise UserError(f"{p} has checkpoint format {version}, newer than this rltrain "
                        f"understands ({FORMAT_VERSION}); upgrade rltrain")
    checksum.check(payload, p, resume=all(k in require for k in RESUME))
    check_payload(payload, p, require)
    bad = first_nonfinite(payload, ("algo", "env.obs_rms")) if "algo" in require else None
    if bad is not None:  # `save` never writes one: the file is damaged, a policy would act on it
        kind = "NaN" if torch.isnan(torch.as_tensor(bad[1])).any() else "inf"
        raise UserError(f"{p} holds {kind} in {bad[0]}: the checkpoint is damaged (rltrain never "
                        f"saves non-finite weights); use another checkpoint of the run")
    return payload


def _why(exc: BaseException, path: Path) -> str:
    """The useful part of a load error: the refused global, a file that torch.save cannot have
    written (neither a zip archive nor a pickle: torch's own error is then a bare number or
    key), else the first line."""
    text = str(exc)
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:  # unreadable (permissions, I/O): torch's own message says why
        head = b"PK\x03\x04"
    if head != b"PK\x03\x04" and head[:1] != b"\x80":
        return "not a file torch.save wrote: it is neither a zip archive nor a pickle"
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return (f"it names {found.group(1)}, which rltrain never loads: a checkpoint holds only "
                f"tensors and plain data")
    detail = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)  # not torch's advice
    first = detail.group(1) if detail else (text.strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"\x1b\[[0-9;]*m", "", first)[:160]


def prune(folder: Path, keep_last: int) -> None:
    """Delete all but the newest `keep_last` periodic `step_*.pt` checkpoints."""
    periodic = sorted(folder.glob(PERIODIC_GLOB))
    for old in periodic[: max(0, len(periodic) - keep_last)]:
        old.unlink(missing_ok=True)
