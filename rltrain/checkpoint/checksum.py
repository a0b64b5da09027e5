"""A checkpoint's checksum: SHA-256 over what `torch.load` gives back, written by `save`, checked
by `load`.

The digest covers the loaded payload, not the file's bytes: a canonical walk of every dict
(keys in order), list and tuple, every plain value (its type and `repr`) and every tensor's
dtype, shape and data bytes (hashed from its memory, no copy for a contiguous CPU tensor; never
its device, so a checkpoint loaded onto a GPU checks the same). Any damage that changes what a
load returns (a tensor's data, a value in the pickle, a record's byte order) is a mismatch;
bytes that no load reads (zip headers and padding, storage bytes outside every tensor) are not
covered, and their damage changes nothing that is used.

A payload without the key loads unchecked (files written before checksums, or by hand with
`torch.save`). The key is the payload's first, right after the pickle's header: damage to its
name alone leaves every value as it was (an unknown key is ignored), and damage reaching its
opcodes fails the load. The format version stays 1: an older rltrain ignores the key.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from rltrain.checkpoint.run_dir import BEST, FINAL, PERIODIC_GLOB
from rltrain.errors import UserError

KEY = "checksum"
"""The payload key holding `sha256:<hex digest>` of the rest of the payload."""
_PREFIX = "sha256:"
_CHUNK = 1 << 24
"""Tensor data longer than this (16 MiB) is hashed as the digests of its chunks, in parallel."""


def digest(payload: dict[str, Any]) -> str:
    """`sha256:<hex>` of `payload` without its `KEY` (see the module's docstring)."""
    h = hashlib.sha256()
    _walk(h, {k: v for k, v in payload.items() if k != KEY})
    return _PREFIX + h.hexdigest()


def check(payload: dict[str, Any], path: str | os.PathLike, resume: bool = False) -> None:
    """Remove `KEY` from a loaded `payload`; one-line `UserError` when it does not match, with
    what to use instead (`resume`: for `resume=`, else for eval and export). A payload without
    one (written before checksums, or by hand with `torch.save`) passes."""
    if KEY not in payload:
        return
    if payload.pop(KEY) != digest(payload):
        instead = _resume_from if resume else _alternatives
        raise UserError(f"{path} is damaged (its checksum does not match its contents): "
                        f"{instead(Path(path))}")


def _alternatives(path: Path) -> str:
    """What else of the run could be used instead: `final.pt` or `best.pt` beside `path`."""
    others = [str(path.with_name(n)) for n in (FINAL, BEST)
              if n != path.name and path.with_name(n).is_file()]
    if others:
        return f"use {' or '.join(others)} of the run, or another checkpoint"
    return f"use another checkpoint (the run has no {FINAL} or {BEST} beside it)"


def _resume_from(path: Path) -> str:
    """The run's other checkpoints a resume can start from instead, the furthest first: every
    checkpoint holds the whole training state (`final.pt` as far as `latest.pt` of a finished
    run, the newest periodic `step_*.pt`, `best.pt` at its evaluation's step)."""
    periodic = sorted(path.parent.glob(PERIODIC_GLOB))[-1:]
    found = [p for p in (path.with_name(FINAL), *periodic, path.with_name(BEST))
             if p.name != path.name and p.is_file()]
    if not found:
        return ("the run has no other checkpoint to resume from; train it again into another "
                "hydra.run.dir")
    return ("resume from another of its checkpoints instead (training goes on from that "
            "checkpoint's step): " + " or ".join(f"resume={p}" for p in found[:2]))


def _put(h: Any, tag: bytes, data: bytes | memoryview) -> None:
    """One framed item: its tag, its length, its bytes (so no two walks hash alike)."""
    h.update(tag + len(data).to_bytes(8, "little"))
    h.update(data)


def _put_data(h: Any, data: memoryview) -> None:
    """Tensor bytes; a large tensor's (a replay buffer's) as the SHA-256 of each `_CHUNK`, on
    torch's threads (hashlib lets go of the GIL): about one core's 1-2 GB/s per thread."""
    if len(data) <= _CHUNK:
        _put(h, b"b", data)
        return
    chunks = [data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)]
    with ThreadPoolExecutor(max(1, min(len(chunks), torch.get_num_threads()))) as pool:
        _put(h, b"c", b"".join(pool.map(lambda c: hashlib.sha256(c).digest(), chunks)))


def _walk(h: Any, value: Any) -> None:
    kind = type(value)
    if isinstance(value, torch.Tensor):  # a Parameter too; the device is not part of it
        _put(h, b"t", f"{value.dtype}{tuple(value.shape)}".encode())
        _put_data(h, _data(value))
    elif isinstance(value, dict):  # dict or OrderedDict (a state_dict): the type is hashed
        _put(h, b"d", f"{kind.__qualname__}:{len(value)}".encode())
        for k, v in value.items():
            _walk(h, k)
            _walk(h, v)
    elif kind is list or kind is tuple:
        _put(h, b"l", f"{kind.__qualname__}:{len(value)}".encode())
        for v in value:
            _walk(h, v)
    elif kind is str:
        _put(h, b"s", value.encode("utf-8", "surrogatepass"))
    else:  # bool, int, float, None (and whatever else a weights-only load may return)
        _put(h, b"v", f"{kind.__module__}.{kind.__qualname__}:{value!r}".encode())


def _data(tensor: torch.Tensor) -> memoryview:
    """The bytes of `tensor`'s elements, in order, as a view of its memory where it can be."""
    flat = tensor.detach().resolve_conj().resolve_neg()
    if flat.device.type != "cpu":
        flat = flat.cpu()
    flat = flat.contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return memoryview(flat.view(torch.uint8).numpy())
