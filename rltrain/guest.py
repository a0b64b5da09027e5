"""What rltrain changes in a caller's process for a run, an evaluation or an export called from
Python, and gives back after it (`guest`). The command line's process is rltrain's own."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import torch

from rltrain.checkpoint import format as checkpoint

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def guest(console: bool = False) -> Iterator[None]:
    """For the block, and given back after it whatever happened inside:

    - the global random streams (torch's CPU and CUDA generators, numpy's and python's): a run
      seeds them with its own seed, so a caller's draws went on from seed 0's after `train()`;
    - autograd on and float32 as torch's default dtype, whatever the caller set (inside
      `torch.no_grad()` or `torch.inference_mode()`, or after `set_default_dtype(float64)`,
      training failed deep inside torch);
    - with `console`, and nothing set up for logging in the process, rltrain's INFO lines on
      stderr (`logging.basicConfig` on the root logger, which stayed, changed the caller's own
      logging for good).
    """
    rng, dtype = checkpoint.rng_state(), torch.get_default_dtype()
    own = logging.getLogger("rltrain")
    handler = None
    if console and not logging.getLogger().handlers and not own.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        level = own.level
        own.addHandler(handler)
        own.setLevel(logging.INFO)
    torch.set_default_dtype(torch.float32)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        torch.set_default_dtype(dtype)
        checkpoint.set_rng_state(rng)
        if handler is not None:
            own.removeHandler(handler)
            own.setLevel(level)


def as_guest(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` run inside `guest()` (an evaluation or an export called from Python)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with guest():
            return fn(*args, **kwargs)

    return wrapper
