"""One-line checks of config values: numbers in range, seeds, devices (each raises `UserError`).

The config dataclasses (`rltrain/config/schema.py`, `rltrain/algos/configs/*.py`) call these from their
`validate` methods, so a meaningless value (a NaN learning rate, a discount of 2, a GPU this
machine lacks) stops the command before anything is built or written.
"""

from __future__ import annotations

import math
import os
import re

from rltrain.errors import UserError

SEED_MAX = 2**32 - 1
"""Largest seed: `np.random.seed` takes [0, 2**32 - 1]; torch and gymnasium take more, so the
derived seeds (`seed + i` for env i, `seed + 10000` for evaluation) may go past it."""
_DEVICES = "choose cpu, cuda, cuda:N, mps or auto"
_DEVICE = re.compile(r"(cpu|cuda|mps)(?::(0|[1-9][0-9]*))?")
"""The device names of `_DEVICES` as `torch.device` spells them (an index: no sign, no 0 prefix)."""


def check_positive(key: str, value: float | None) -> None:
    """Raise `UserError` unless `value` (when set) is a finite number > 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{key}={value} must be a finite number > 0")


def check_non_negative(key: str, value: float | None) -> None:
    """Raise `UserError` unless `value` (when set) is a finite number >= 0."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UserError(f"{key}={value} must be a finite number >= 0")


def check_finite(key: str, value: float | None) -> None:
    """Raise `UserError` unless `value` (when set) is a finite number."""
    if value is not None and not math.isfinite(value):
        raise UserError(f"{key}={value} must be a finite number")


def check_fraction(key: str, value: float, zero: bool = True) -> None:
    """Raise `UserError` unless `value` is in [0, 1] (in (0, 1] when `zero` is False)."""
    if not (0.0 <= value <= 1.0 and (zero or value > 0.0)):
        raise UserError(f"{key}={value} must be in {'[' if zero else '('}0, 1]")


def check_seed(key: str, value: int, count: int = 1) -> None:
    """Raise `UserError` unless the seeds `value` ... `value + count - 1` are in [0, SEED_MAX]."""
    if not 0 <= value <= SEED_MAX:
        raise UserError(f"{key}={value} must be in [0, {SEED_MAX}] (numpy's seed range, "
                        f"0 to 2**32 - 1)")
    if value + count - 1 > SEED_MAX:
        raise UserError(f"{key}={value} with {count} seeds would train seed "
                        f"{value + count - 1}; seeds must be <= {SEED_MAX} (2**32 - 1)")


def check_device(key: str, name: str, here: bool = True) -> None:
    """Raise `UserError` unless `name` is a torch device rltrain runs on (cpu, cuda[:N], mps,
    auto) and, when `here`, one this machine has. The name is read as `torch.device` reads it,
    without torch: only a GPU name checked `here` imports it, to ask whether the GPU exists."""
    if name == "auto":
        return
    match = _DEVICE.fullmatch(str(name))
    if match is None:
        raise UserError(f"{key}={name}: {_DEVICES}")
    kind, index = match.group(1), match.group(2)
    if not here or kind == "cpu":
        return
    if kind == "cuda":
        _check_cuda(key, name, None if index is None else int(index))
    if kind == "mps":
        # start-up: torch only for an MPS device (composing a config imports no torch)
        import torch

        if not torch.backends.mps.is_available():
            raise UserError(f"{key}={name}: MPS is not available "
                            f"(torch.backends.mps.is_available() is False); use {key}=cpu")


def _check_cuda(key: str, name: str, index: int | None) -> None:
    # start-up: torch only for a CUDA device (composing a config imports no torch)
    import torch

    if not torch.cuda.is_available():
        raise UserError(f"{key}={name}: no CUDA GPU is available "
                        f"(torch.cuda.is_available() is False); use {key}=cpu")
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        raise UserError(f"{key}={name}: this machine has {count} CUDA GPU(s), cuda:0 to "
                        f"cuda:{count - 1}; use {key}=cuda:0 or {key}=cpu")


def available_memory() -> int | None:
    """Bytes of host memory new allocations can still get, without torch: Linux's
    `MemAvailable` (free memory plus the caches the kernel gives back), else the free physical
    pages `sysconf` reports; None when neither is known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX, or a name this OS lacks
        return None
