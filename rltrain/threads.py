"""torch's intra-op thread count, set for a run and given back after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int = 0) -> Iterator[None]:
    """torch's intra-op threads set to `n` for the block (0: left as they are), then given back
    whatever happened inside: a run, an evaluation or an export called from Python leaves the
    caller's count as it found it (one run's `torch_threads=1` set the next run's "torch's
    default" to 1, and the caller's process stayed at 1)."""
    before = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
