"""An algorithm's whole update as one compiled graph: its `learn(steps, ...)` (the one copy of its
math, `algos/steps.py`) traced over `GraphSteps` by `torch.compile` (inductor), so that the
forward and backward passes, every optimizer step and the target updates of a gradient step run
as generated code, without Python between them.

Where it pays (measured 2026-11-28, torch 2.13 CPU, 2 cores, one thread, 1 seed): see
`benchmarks/results/compiled_update.md`. The first compile of a graph costs tens of seconds;
inductor keeps what it generated in a cache folder (`compile_cache`, or `TORCHINDUCTOR_CACHE_DIR`
when set), so a later run of the same shapes on the same machine starts in seconds.

`compile=auto` turns it on where a run plans enough gradient steps to pay the first compile
back (`AUTO_MIN_UPDATES`); `true` wherever the algorithm has a compiled update; `false` never.
A compile that fails (no C++ compiler, an operation inductor cannot take) says so in one line
and the run goes on eagerly: nothing has changed by then, as a graph runs only once compiled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from rltrain.algos.optim import FusedAdam
from rltrain.algos.steps import GraphSteps

log = logging.getLogger("rltrain")

AUTO_MIN_UPDATES = 50_000
"""`compile=auto` compiles a run that plans at least this many gradient steps, unless the
algorithm's class says otherwise (`COMPILE_PAYS_AFTER`: its measured break-even with a margin,
or None where it never pays on the CPU)."""


def default_cache_dir() -> Path:
    """Where inductor's cache goes unless the user says: `$TORCHINDUCTOR_CACHE_DIR`, else
    `$XDG_CACHE_HOME/rltrain/inductor` (`~/.cache/...`), which outlives `/tmp`."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rltrain" / "inductor"


def why_not(algo: Any, device: torch.device) -> str | None:
    """Why `algo`'s update cannot be compiled here, or None when it can."""
    if not callable(getattr(algo, "learn", None)) or not hasattr(algo, "steps"):
        return f"{type(algo).__name__} has no compiled update yet"
    if device.type not in ("cpu", "cuda"):
        return f"torch.compile does not serve device {device.type}"
    if device.type == "cpu" and not (shutil.which("g++") or shutil.which("c++")
                                     or shutil.which("clang++")):
        return "no C++ compiler (g++) on PATH, which inductor needs on the CPU"
    optimizers = [t.optimizer for t in algo.steps.trained.values()]
    if not all(isinstance(o, FusedAdam) for o in optimizers):
        return "its optimizers are not rltrain's Adam (a torch build without a fused kernel)"
    return None


def choose(mode: str, algo: Any, device: torch.device, planned_updates: int) -> tuple[bool, str]:
    """(compile or not, the reason in words) for `compile=mode` (auto, true or false)."""
    if mode == "false":
        return False, "compile=false"
    reason = why_not(algo, device)
    if reason is not None:
        return False, reason
    if mode == "true":
        return True, "compile=true"
    pays_after = getattr(algo, "COMPILE_PAYS_AFTER", AUTO_MIN_UPDATES)
    if pays_after is None:
        return False, (f"compile=auto: {type(algo).__name__}'s update gains too little here to pay "
                       "back a compile; compile=true compiles it")
    if planned_updates < pays_after:
        return False, (f"{planned_updates:,} planned gradient steps, fewer than the "
                       f"{pays_after:,} that pay back a first compile")
    return True, f"{planned_updates:,} planned gradient steps"


def use(algo: Any, cache_dir: str | Path | None = None) -> None:
    """From the next update on, `algo.update` runs its `learn` compiled (`CompiledLearn`), with
    inductor's cache in `cache_dir` (default: `default_cache_dir()`)."""
    folder = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    algo.graph = CompiledLearn(algo, folder)


@contextlib.contextmanager
def _cache_in(folder: Path) -> Iterator[None]:
    """Inductor's cache in `folder` for the block (it reads `TORCHINDUCTOR_CACHE_DIR` whenever it
    compiles), the caller's variable given back after: a `train()` leaves the process as it was."""
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


OPTIONS = {"size_asserts": False}
"""Inductor's settings for the update's graph. Its generated code checked every input's sizes and
strides on each call (~40 checks, ~30 µs of DQN CartPole's ~0.70 ms step, measured 2026-11-28);
`signature` holds each tensor's shape and strides, and a call of an unseen signature runs all of
dynamo's guards (which compile a new graph for other strides), so what they checked cannot
differ."""


class CompiledLearn:
    """`algo.learn` over `GraphSteps`, compiled on its first call (one graph per distinct
    argument structure: SAC's steps with and without the actor are two; a seed batch's other
    seed count is another). Called as `learn(*args)` without `steps`, as `algo.update` calls
    the eager one.

    A call whose arguments' structure (`signature`) was seen before skips dynamo's guards but
    those that tell its graphs apart (`skip_guard_eval_unsafe`): the guards checked ~40 tensors
    on every call, ~70 µs of DQN's ~0.7 ms step. What they would check cannot change: the
    signature holds every argument's shape, dtype, device and Python value, and the algorithm's
    own tensors (`EagerSteps.tensors()`) are the same tensors for its life. A new signature
    runs every guard, so a new graph is compiled rather than an old one taken.

    Each instance compiles a function of its own (`own_copy`): dynamo keeps its graphs on the
    function's code object, so the graphs of every run in a process piled up on one and dynamo's
    limit (8) was reached after a few runs (a sweep's later jobs, a test suite)."""

    def __init__(self, algo: Any, folder: Path):
        self.algo, self.folder = algo, folder
        with _cache_in(folder):  # torch.compile's first use in a process sets the variable
            self.compiled = torch.compile(own_copy(graph_of_learn), fullgraph=True,
                                          dynamic=False, options=OPTIONS)
        self.seen: set[Any] = set()
        """The signatures of the arguments of the calls so far (each compiled)."""
        self.compile_seconds = 0.0
        """What the first call took (the compile and one update), for benchmarks."""
        self.untaken = 0.0
        """Seconds spent compiling (every variant's) not yet taken by `take_compile_seconds`."""

    def __call__(self, *args: Any) -> Any:
        key = signature(args)
        if key in self.seen:
            with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
                return self.compiled(self.algo, self.algo.steps.tensors(), *args)
        first = not self.seen
        if first:
            log.info("compile: compiling %s's update (once per shape and machine: later runs "
                     "take it from the cache)", type(self.algo).__name__)
        started = time.perf_counter()
        try:
            with _cache_in(self.folder):  # a later call may compile another variant (TD3
                out = self.compiled(self.algo, self.algo.steps.tensors(), *args)  # w/o actor)
        except Exception as exc:  # noqa: BLE001 - any failure to compile: go on eagerly
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            log.warning("compile: %s's update did not compile (%s: %s); training eagerly",
                        type(self.algo).__name__, type(exc).__name__, reason)
            self.algo.graph = None
            return self.algo.learn(self.algo.steps, *args)
        self.seen.add(key)
        elapsed = time.perf_counter() - started
        self.untaken += elapsed
        if first:
            self.compile_seconds = elapsed
            log.info("compile: compiled in %.1f s", elapsed)
        return out


def take_compile_seconds(algo: Any) -> float:
    """The seconds `algo`'s compiled update spent compiling that no one has taken yet (0.0
    for an eager update): a one-off pause the progress leaves out of its speed."""
    graph = getattr(algo, "graph", None)
    if not isinstance(graph, CompiledLearn):
        return 0.0
    seconds, graph.untaken = graph.untaken, 0.0
    return seconds


def graph_of_learn(algo: Any, tensors: dict[str, Any], *args: Any) -> Any:
    """What is compiled: `algo.learn` over `GraphSteps` of `tensors`."""
    return algo.learn(GraphSteps(algo.steps, tensors), *args)


def own_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a new function object with a code object of its own (equal, not the same)."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


def signature(x: Any) -> Any:
    """What of `x` (the arguments of a `learn` call: tensors, named tuples, dicts, lists and
    plain values) a compiled graph was made for: each tensor's shape, dtype, device and
    whether it needs a gradient, and its strides (the graph reads its inputs at the strides it
    was made for: `OPTIONS`); every other value as it is. Two calls of one signature take the
    same graph."""
    if isinstance(x, torch.Tensor):
        return (tuple(x.shape), x.stride(), x.dtype, x.device, x.requires_grad)
    if isinstance(x, dict):
        return tuple((k, signature(v)) for k, v in x.items())
    if isinstance(x, tuple | list):
        return (type(x), *(signature(v) for v in x))
    return (type(x), x)
