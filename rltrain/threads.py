"""torch's intra-op thread count and denormal mode, set for a run and given back after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int = 0, flush_denormal: bool = False) -> Iterator[None]:
    """torch's intra-op threads set to `n` for the block (0: left as they are), then given back
    whatever happened inside: a run, an evaluation or an export called from Python leaves the
    caller's count as it found it (one run's `torch_threads=1` set the next run's "torch's
    default" to 1, and the caller's process stayed at 1).

    `flush_denormal`: denormal floats flushed to zero in this thread for the block
    (`TrainConfig.flush_denormal`), and torch's default (off) set again after it: torch cannot
    say what the caller had."""
    before = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    flushed = flush_denormal and torch.set_flush_denormal(True)  # False: this CPU cannot
    try:
        yield
    finally:
        torch.set_num_threads(before)
        if flushed:
            torch.set_flush_denormal(False)
