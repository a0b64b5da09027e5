"""Periodic evaluations off the training path (`eval.background`): a second process runs the
deterministic episodes on a snapshot of the policy (and of the observation normalizer) while
training goes on, and hands the result back; the Runner logs it at the step of its snapshot and
keeps `best.pt` from it, written by the Runner, the run folder's one writer.

One evaluation runs at a time: an evaluation that falls due while the previous one still runs is
skipped (said once; never waited for). An evaluator that fails or dies is said in one line and
the run evaluates in its own process from then on: training never stalls on it and never loses
anything. The final evaluation stays in the training process.

A stop is the training process's to handle: the terminal sends Ctrl-C to the whole process group,
SLURM and docker send SIGTERM to every process, so the evaluator ignores both all its life (they
are held back while it starts, before Python runs a line of it: a signal then would print a
traceback from inside `import torch`). The Runner ends it however the run ends, and it ends on
its own once the training process is gone (killed: nothing else would tell it).

The child is started with `spawn` (~3 s to import torch and rltrain on a spare core, once a
run), builds the eval env and the algorithm's networks from the run's config, and evaluates
with `run_episodes`, the function the training process evaluates with: the same weights give
the same result in either process.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from rltrain.text import first_line

log = logging.getLogger("rltrain")

BACKGROUND_FROM = 50_000
"""`eval.background=auto` evaluates in the background for runs of at least this many env steps
(shorter runs do not repay the evaluator's start-up) with periodic evaluations and a spare core."""
START_TIMEOUT_S = 120.0
"""How long `runner.background_eval.BackgroundEvals.collect(wait=True)` waits for the pending result
before the final evaluation (a first result includes the evaluator's start-up)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run (Ctrl-C, SLURM's and docker's SIGTERM): the evaluator ignores them."""
PARENT_CHECK_S = 1.0
"""How often an idle evaluator looks whether the training process is still there."""


def wanted(setting: str, total_timesteps: int, eval_freq: int, threads: int, solo: bool,
           rebuildable: bool) -> bool:
    """Whether a run evaluates in the background: `eval.background=true`, or `auto` with a
    spare core, periodic evaluations and a budget of at least `BACKGROUND_FROM` steps. Never
    for a run whose algorithm or env the evaluator cannot rebuild from the config
    (`rebuildable`), nor under torchrun or in a seed batch (`solo` False)."""
    if setting == "false" or not solo or not rebuildable or eval_freq <= 0:
        return False
    if setting == "true":
        return True
    spare = (os.cpu_count() or 1) > max(1, threads)
    return spare and total_timesteps >= BACKGROUND_FROM


@dataclass
class Snapshot:
    """What one background evaluation needs, taken at `step`: the policy's weights, the
    normalizer statistics, and the checkpoint payload `best.pt` gets if it is the best."""

    step: int
    policy: dict[str, torch.Tensor]
    env_state: dict
    payload: dict


def cpu_copy(state: Any) -> Any:
    """`state` with every tensor copied to the CPU (the queue pickles it later, in a thread)."""
    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, dict):
        return {k: cpu_copy(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(cpu_copy(v) for v in state)
    return state


class BackgroundEvaluator:
    """The evaluator process of one run (see the module docstring)."""

    def __init__(self, config: dict[str, Any]):
        ctx = mp.get_context("spawn")
        self._inbox, self._outbox = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(config, self._inbox, self._outbox),
                                   name="rltrain-evaluator", daemon=True)
        with _no_main_module(), _stop_signals_held():
            self.process.start()
        # multiprocessing's own exit hook only sends SIGTERM, which the evaluator ignores, and
        # then waits for it; this hook runs first (registered later) and kills it
        self._owner = os.getpid()  # (a forked copy of this process runs the hook too)
        atexit.register(self._kill)
        self.pending: Snapshot | None = None
        self.skipped = 0

    def submit(self, snapshot: Snapshot) -> bool:
        """Hand `snapshot` to the evaluator; False (and nothing sent) while one still runs.
        Raises `EvaluatorFailed` when the evaluator is gone."""
        if not self.process.is_alive():
            raise EvaluatorFailed(f"the evaluator process ended (exit code "
                                  f"{self.process.exitcode})")
        if self.pending is not None:
            self.skipped += 1
            return False
        self.pending = snapshot
        self._inbox.put((snapshot.step, cpu_copy(snapshot.policy), cpu_copy(snapshot.env_state)))
        return True

    def poll(self, timeout: float | None = None) -> tuple[Snapshot, dict[str, Any]] | None:
        """The finished evaluation (its snapshot and result), if one is back (waiting up to
        `timeout` seconds; None: not at all). Raises `EvaluatorFailed` when the evaluator
        reported an error or is gone."""
        if self.pending is None:
            return None
        try:
            step, result = (self._outbox.get(timeout=timeout) if timeout
                            else self._outbox.get_nowait())
        except queue.Empty:
            if not self.process.is_alive():
                raise EvaluatorFailed(f"the evaluator process ended (exit code "
                                      f"{self.process.exitcode})") from None
            return None
        if step is None:
            raise EvaluatorFailed(str(result))
        snapshot, self.pending = self.pending, None
        return snapshot, result

    def close(self) -> None:
        """End the evaluator now (a pending evaluation is dropped)."""
        atexit.unregister(self._kill)
        if self.process.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self._inbox.put(None)
            self.process.join(timeout=2.0)
        if self.process.is_alive():  # still evaluating, or still starting
            self._kill()
            self.process.join(timeout=2.0)
        for q in (self._inbox, self._outbox):
            q.cancel_join_thread()  # never block the training process's exit on a full pipe
            q.close()

    def _kill(self) -> None:
        """SIGKILL the evaluator if it runs (it ignores SIGTERM, so `terminate()` would not do)."""
        if os.getpid() == self._owner and self.process.is_alive():
            self.process.kill()


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """While the evaluator starts: `STOP_SIGNALS` blocked in this thread, a mask the child
    inherits through fork and exec, so none can reach it before `_serve` ignores them. This
    process loses none: the kernel hands one to another thread, or it waits for the unblock."""
    if not hasattr(signal, "pthread_sigmask"):  # (Windows: no such signals to a group)
        yield
        return
    from multiprocessing import resource_tracker

    # started inside, the tracker would unblock them (its own start blocks and unblocks them)
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _no_main_module() -> Iterator[None]:
    """While the evaluator starts: no `__main__` for `spawn` to run again in the child. A script
    calling `rltrain.train()` without an `if __name__ == "__main__":` guard would otherwise
    train again inside the evaluator (multiprocessing re-imports the parent's main script)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class EvaluatorFailed(Exception):
    """The background evaluator cannot go on (the message says why, in one line)."""


def _serve(config: dict[str, Any], inbox: Any, outbox: Any) -> None:
    """The evaluator process: build the eval env and networks once, then evaluate each
    snapshot received until told to stop (None) or the training process is gone."""
    for sig in STOP_SIGNALS:  # a stop is the training process's to handle
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # held since the start (`_stop_signals_held`)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        cfg, env, policy = _build(config)
    except Exception as exc:  # noqa: BLE001 - said by the training process in one line
        outbox.put((None, _one_line(exc)))
        return
    from rltrain.envs.make import load_env_state
    from rltrain.evaluation.episodes import run_episodes

    while (message := _next(inbox)) is not None:
        step, weights, env_state = message
        try:
            policy.load_state_dict(weights)
            load_env_state(env, env_state)
            result = run_episodes(policy, env, cfg.eval.episodes, cfg.eval.deterministic,
                                  seed=cfg.seed + cfg.eval.seed_offset)
        except Exception as exc:  # noqa: BLE001
            outbox.put((None, _one_line(exc)))
            return
        outbox.put((step, result))


def _build(config: dict[str, Any]) -> tuple[Any, Any, torch.nn.Module]:
    """The run's validated config, its eval env and its algorithm's policy, on the CPU."""
    torch.set_num_threads(1)
    # the child imports what it needs itself (spawn): nothing is shared with the parent
    from rltrain.config.registry import get_algo_spec
    from rltrain.config.validation import to_train_config
    from rltrain.envs.make import make_env

    cfg = to_train_config(config, here=False)
    env = make_env(cfg.env, "cpu", training=False,
                   num_envs=min(cfg.eval.num_envs, cfg.eval.episodes))
    algo = get_algo_spec(cfg.algo.name).build(cfg.algo, env.spec, torch.device("cpu"))
    return cfg, env, algo.policy


def _next(inbox: Any) -> Any:
    """The next message, or None once the training process is gone (SIGKILLed, say: no None
    would come, and the stop signals that end it with its group are ignored here)."""
    parent = mp.parent_process()
    while True:
        try:
            return inbox.get(timeout=PARENT_CHECK_S)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return None


def _one_line(exc: Exception) -> str:
    """`exc` as `Type: first line of its message` (`rltrain.text.first_line`)."""
    return f"{type(exc).__name__}: {first_line(exc) if str(exc).strip() else ''}"
