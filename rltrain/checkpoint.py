"""Checkpoints: a plain dict of tensors and plain data, written atomically, loaded weights-only.

Payload keys: `format_version`, `config` (the resolved config as a plain dict), `algo` (networks
and optimizers), `env` (normalizer statistics), `counters` (global_step, iteration, ...),
`rng` (torch, numpy and python generator states), `metrics` (last eval result). Loading never
imports or calls anything named in the file: `torch.load(weights_only=True)` only.
"""

from __future__ import annotations

import os
import pickle
import random
import socket
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain.errors import UserError

FORMAT_VERSION = 1


def rng_state() -> dict[str, Any]:
    """The torch, numpy and python RNG states as weights-only-loadable data."""
    legacy = np.random.get_state()
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    state["numpy"] = {"keys": torch.from_numpy(legacy[1].astype(np.int64)), "pos": int(legacy[2]),
                      "has_gauss": int(legacy[3]), "cached_gaussian": float(legacy[4])}
    state["python"] = random.getstate()
    if torch.cuda.is_available():
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
    """Write `payload` to `path` atomically: temp file in the same folder, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_temp_prefix(path)}{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format_version": FORMAT_VERSION, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a failed write (unpicklable value, full disk) leaves no temp file
        tmp.unlink(missing_ok=True)
        raise
    _remove_stale_temps(path)
    return path


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
        for candidate in (p / "checkpoints" / "latest.pt", p / "latest.pt"):
            if candidate.is_file():
                return candidate
        raise UserError(f"no checkpoints/latest.pt under {p}: pass a .pt file or a run directory")
    if not p.exists():
        raise UserError(f"checkpoint {p} does not exist")
    return p


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and check a checkpoint; any unreadable or foreign file is a one-line `UserError`."""
    p = resolve(path)
    try:
        payload = torch.load(p, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, ValueError,
            OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{p} is not a readable rltrain checkpoint ({first[:160]})") from exc
    if not isinstance(payload, dict) or "format_version" not in payload or "config" not in payload:
        raise UserError(f"{p} is not an rltrain checkpoint (no format_version/config)")
    if payload["format_version"] > FORMAT_VERSION:
        raise UserError(f"{p} has checkpoint format {payload['format_version']}, newer than this "
                        f"rltrain understands ({FORMAT_VERSION}); upgrade rltrain")
    return payload


def prune(folder: Path, keep_last: int) -> None:
    """Delete all but the newest `keep_last` periodic `step_*.pt` checkpoints."""
    periodic = sorted(folder.glob("step_*.pt"))
    for old in periodic[: max(0, len(periodic) - keep_last)]:
        old.unlink(missing_ok=True)
