"""Graceful stops: SIGINT/SIGTERM (what SLURM sends before a kill) and a `STOP` file.

The first signal asks the loop to stop after the current iteration, so the Runner can write
`latest.pt` and close its loggers; a second Ctrl-C exits at once.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.envs.trust import resume_command
from rltrain.errors import DiskFull, TrainingError, UserError
from rltrain.runner.callbacks import LoopState

log = logging.getLogger("rltrain")

STOP_POLL_SECONDS = 0.2
"""How often the loop looks for a `STOP` file (it is seen within this long of its creation)."""


class GracefulStop:
    """Context manager installing the stop handlers (main thread only; elsewhere a no-op)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, state: LoopState, run_dir: Path, deferred: bool = False):
        """`deferred` (the ranks of a torchrun job): a signal only sets `pending`; the Runner
        turns it into `state.stop` when all ranks agree (so every rank stops at one step)."""
        self.state, self.stop_file = state, RunDir(run_dir).stop_file
        self.states = [state]
        """The loop states a stop stops: this run's, or every seed's of a batch (`join`)."""
        self.signum: int | None = None
        self.deferred, self.pending = deferred, False
        self.peers: list[GracefulStop] = [self]
        self._previous: dict[int, object] = {}
        self._next_poll = 0.0  # time.monotonic() of the next look for the STOP file

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: leave now
        self.signum = signum
        self.pending = True
        for state in self.states:
            state.stop = state.stop or not self.deferred
            state.stop_reason = signal.Signals(signum).name
        log.warning("%s received: stopping after this iteration (Ctrl-C again to quit now)",
                    self.state.stop_reason)

    @staticmethod
    def join(stoppers: list[GracefulStop]) -> None:
        """Make `stoppers` one stop (the seeds of a batch): a signal any of them hears, or a
        `STOP` file any of them finds, stops every one's loop state, and each tells of the
        signal (`signum`: the exit code the batch gives)."""
        states = [s.state for s in stoppers]
        for stopper in stoppers:
            stopper.states = states
            stopper.peers = stoppers

    def check_stop_file(self, force: bool = False) -> bool:
        """Stop (the same graceful way) when `<run dir>/STOP` exists; the file is consumed.

        The file system is asked at most every `STOP_POLL_SECONDS` (a `stat` per env step was
        ~5% of a one-env off-policy step), unless `force`."""
        now = time.monotonic()
        if not force and now < self._next_poll:
            return self.state.stop
        self._next_poll = now + STOP_POLL_SECONDS
        if self.stop_file.exists():
            self.stop_file.unlink(missing_ok=True)
            if not self.state.stop:
                for state in self.states:
                    state.stop, state.stop_reason = True, state.stop_reason or "STOP file"
                log.warning("found %s: stopping after this iteration", self.stop_file)
        return self.state.stop

    def requested(self) -> bool:
        """True once a stop was asked for (a signal, or a `STOP` file, which is consumed)."""
        return self.state.stop or any([p.check_stop_file(force=True) for p in self.peers])

    @property
    def heard(self) -> int | None:
        """The signal this stop (or a peer joined to it) heard; None when none did."""
        return next((s.signum for s in self.peers if s.signum is not None), None)

    def clear_stale_stop_file(self) -> None:
        """Remove a `STOP` file that was created while no run was live: it is not for this run."""
        if self.stop_file.exists():
            self.stop_file.unlink(missing_ok=True)
            log.warning("removed %s, left from before this run started", self.stop_file)


# errno values of a full disk and of an exhausted quota
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException) -> OSError | None:
    """The full-disk `OSError` behind `exc`: itself, or one it was raised from or while handling
    (`__cause__`, `__context__`). torch's zip writer turns an ENOSPC inside `torch.save` into
    `RuntimeError: [enforce fail at inline_container.cc] unexpected pos ...`, with the
    `OSError` only as its `__context__`."""
    todo, seen = [exc], set()
    while todo:
        err = todo.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _DISK_FULL:
            return err
        todo += [err.__cause__, err.__context__]
    return None


@contextlib.contextmanager
def disk_full_is_one_line(run_dir: Path, env: Any = None, then: str | None = None) -> Iterator[None]:
    """Turn a full disk, wherever it strikes in a run (also inside `torch.save`), into one
    `DiskFull` line with the command that resumes the run (`env`: the run's env config, for the
    `env.import=` a resume of a user's env needs), or with `then` in its place (a trial's own
    files: no command resumes a trial)."""
    try:
        yield
    except (UserError, TrainingError):  # already one line that says what to do
        raise
    except Exception as exc:
        full = disk_full(exc)
        if full is None:
            raise
        if then is None:
            then = (f"the last good checkpoint is kept; free space, then "
                    f"{resume_command(run_dir, env)}" if RunDir(run_dir).can_resume()
                    else "no checkpoint was written yet")
        raise DiskFull(f" ({full.filename})" if full.filename else "", then) from exc
