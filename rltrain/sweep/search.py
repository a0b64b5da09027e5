"""The `+hpo=` search this process runs: the lock of its study's folder and its stop handling.

One live search per study: a search holds the lock of its SQLite study's folder (the run-folder
lock of `rltrain.run_folder.lock`), and a second search of the same study is refused in one
line. A stop (SIGINT, SIGTERM, a trial's `STOP` file) at any moment of a search exits with 128 +
the signal (0 for `STOP`) and one line saying how to continue; never a traceback, and never a
lost trial.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import DiskFull, UserError
from rltrain.run_folder.lock import check_not_live, run_lock

log = logging.getLogger("rltrain")


class _Search:
    """The search this process runs, from `ResumeStudy.on_multirun_start` to its end: the lock
    of its study's folder, its stop handlers and the command that continues it.

    A signal that lands in the study's bookkeeping (between trials, or before the first) is
    held until the next safe point: before a trial's job starts, after a job ends, or at the
    search's end. One that lands in a trial's job outside its runs (which handle their own)
    stops at once: the job has written nothing there that a stop could damage. A signal that a
    run took but did not obey (it came while the final checkpoints were written) is seen after
    the job, through a wakeup pipe that every signal writes to, whichever handler takes it.
    """

    def __init__(self) -> None:
        self.active, self.in_job = False, False
        self.signum: int | None = None
        self.command = "the same command"
        self._locks = contextlib.ExitStack()
        self._previous: dict[int, Any] = {}
        self._pipe: tuple[int, int] | None = None
        self._wakeup = -1
        self._registered = False

    def start(self, command: str) -> None:
        """Begin a search: its stop handlers, where this is the main thread."""
        self.end()
        self.active, self.in_job, self.signum, self.command = True, False, None, command
        self._locks = contextlib.ExitStack()
        if not self._registered:  # a search that exits with a trial's SystemExit unlocks too
            atexit.register(self.end)
            self._registered = True
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._pipe = (read, write)
        self._wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def lock(self, folder: Path, study: str) -> None:
        """Make and hold the study's folder for this search; one line when a live search
        holds it."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror
            raise UserError(f"cannot create the study's folder {folder}: {why}; choose "
                            "another hydra.sweep.dir") from exc
        try:
            check_not_live(folder)
        except UserError:
            raise UserError(f"study {study} in {folder} is in use by a live search "
                            f"({_holder(folder)}); wait for it, stop it (Ctrl-C, or kill -TERM "
                            f"its pid), or choose another hydra.sweep.dir") from None
        self._locks.enter_context(run_lock(folder))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: quit now
        self.signum = signum
        if self.in_job:
            self.stop(signum)
        log.warning("%s received: the search stops before its next trial (Ctrl-C again to "
                    "quit now)", signal.Signals(signum).name)

    def signalled(self) -> int | None:
        """The last SIGINT or SIGTERM delivered since the last call, whoever handled it."""
        data = b""
        while self._pipe is not None:
            try:
                chunk = os.read(self._pipe[0], 512)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        found = [b for b in data if b in (signal.SIGINT, signal.SIGTERM)]
        return found[-1] if found else None

    def stop(self, signum: int | None) -> NoReturn:
        """End the search now: exit 128 + `signum` after one line saying how to continue it
        (`signum` None: a trial's `STOP` file, whose run said it already; exit 0)."""
        if signum is not None:
            log.warning("search stopped (%s); its study and trial folders are kept. Continue "
                        "it with: %s", signal.Signals(signum).name, self.command)
        self.end()
        raise SystemExit(0 if signum is None else 128 + signum)

    def end(self) -> None:
        """Give back the handlers and the study's lock (safe to call twice)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._pipe is not None:
            signal.set_wakeup_fd(self._wakeup)
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        self._locks.close()
        self.active = self.in_job = False


SEARCH = _Search()
"""The search of this process (the launcher's workers run jobs only: theirs stays inactive)."""


def in_search() -> bool:
    """True in the process of a live `+hpo=` search (its runs do not say how to resume them
    alone: the search says how to continue it)."""
    return SEARCH.active


@contextlib.contextmanager
def search_continues() -> Iterator[None]:
    """Inside a search, a full disk's line says how to continue the search: the resume of one
    trial's run (what the run's own line names) would not continue it."""
    try:
        yield
    except DiskFull as exc:
        if not SEARCH.active:
            raise
        raise exc.then(f"the study and its trial folders are kept; free space, then continue "
                       f"the search with: {SEARCH.command}") from exc.__cause__


def preempted(signum: int) -> NoReturn:
    """A run stopped by a signal: exit 128 + it (what schedulers read); inside a search, with
    the one line that continues the search."""
    if SEARCH.active:
        SEARCH.stop(signum)
    raise SystemExit(128 + signum)


def _holder(folder: Path) -> str:
    """Who holds `folder`'s lock, from the stamp `run_lock` writes into it."""
    try:
        info = json.loads(RunDir(folder).lock.read_text())
        return f"pid {info['pid']} on host {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
