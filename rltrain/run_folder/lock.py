"""Who may write into a run folder: one live run at a time, and never into a finished run.

A live run holds `<run>/.lock`: the file names its pid and host (for messages), and an
exclusive `flock` on it proves the holder is alive. The kernel drops a flock when its process
dies, however it dies, so a lock left by a killed run is taken over without guessing from pids;
a second run into a live folder is refused with one line. A process may take a lock it already
holds (the CLI locks a folder before Hydra writes into it; the Runner locks it again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from rltrain.checkpoint.run_dir import RunDir
from rltrain.envs.trust import resume_command
from rltrain.errors import UserError

log = logging.getLogger("rltrain")
_HELD: dict[Path, tuple[int, int]] = {}  # lock path -> (fd, how many times this process took it)
_STARTED: set[Path] = set()  # run folders a Runner opened in this process (`mark_started`)


def holds_run(run_dir: Path) -> bool:
    """True when `run_dir` has a run in it: checkpoints, metrics or TensorBoard events, its
    own or those of a seed of the batch it holds (or the batch's `seeds.json`)."""
    paths = RunDir(run_dir)
    if paths.has_checkpoint() or paths.metrics_csv.exists() or paths.tb.is_dir():
        return True
    return paths.seeds_summary.exists() or any(holds_run(paths.seed(s).root)
                                               for s in paths.seed_folders())


def finished_step(run_dir: Path) -> int | None:
    """The step a finished run ended at (it has `final.pt`); None for a run that is not finished."""
    final = RunDir(run_dir).final
    if not final.is_file():
        return None
    # start-up: torch only to read a checkpoint (claiming a run folder imports none)
    from rltrain.checkpoint import format as checkpoint

    try:
        counters = checkpoint.load(final).get("counters", {})
        return int(counters.get("global_step", 0))
    except (UserError, TypeError, ValueError, AttributeError):
        return 0


FAILED_START = frozenset({".hydra", "train.log", ".lock"})
"""What a run that failed before its first step leaves in its folder: Hydra's record of the
command, the log of the failure (already on the console) and the lock, nothing of a run."""


def _key(path: Path) -> Path:
    """`path` absolute with `..` resolved as Hydra resolves its run dir (`os.path.abspath`), not
    symlinks: the CLI's `x/../run` and the Runner's `run` are one folder, one lock."""
    return Path(os.path.abspath(path))


def new_folders(run_dir: Path) -> list[Path]:
    """`run_dir` and those of its ancestors that do not exist yet, innermost first."""
    out = []
    for folder in (run_dir, *_key(run_dir).parents):
        if folder.exists():
            break
        out.append(folder)
    return out


def mark_started(run_dir: Path) -> None:
    """Say that a run started in `run_dir` (the Runner opened it): its log is the run's,
    and `clear_failed_start` leaves the folder alone however the run ends."""
    _STARTED.add(_key(run_dir))


def started(run_dir: Path) -> bool:
    """True when a run started in `run_dir` in this process (`mark_started`)."""
    return _key(run_dir) in _STARTED


def clear_failed_start(run_dir: Path) -> bool:
    """Empty `run_dir` (but for its lock) when no run started there (`mark_started`) and it
    holds only what a failed start leaves (`FAILED_START`); True when it did. Call it holding
    the run's lock, on a folder this command created, then `remove_empty` after the lock."""
    try:
        if started(run_dir) or not set(os.listdir(run_dir)) <= FAILED_START:
            return False
        shutil.rmtree(run_dir / ".hydra", ignore_errors=True)
        (run_dir / "train.log").unlink(missing_ok=True)
    except OSError:
        return False
    return True


def remove_empty(folders: list[Path]) -> None:
    """`rmdir` each of `folders` (innermost first) while it is empty; another process's file
    in one (a run that took the folder meanwhile) stops it there."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def check_target(run_dir: Path, resume: str | None, total_timesteps: float | None) -> None:
    """Refuse (one line) a run that would write into another run's folder.

    A fresh run needs an empty folder; `resume=auto` never continues a finished run; an explicit
    `resume=` of a finished run must raise `total_timesteps` beyond the step it ended at.
    """
    if not run_dir.is_dir():
        return
    done = finished_step(run_dir)
    if done is not None and (resume in (None, "auto") or (total_timesteps or 0) <= done):
        raise UserError(f"{run_dir} holds a finished run (final.pt at step {done:,}); train it "
                        f"longer with `{resume_command(run_dir, None)} total_timesteps=<more "
                        f"than {done}>`, or choose another hydra.run.dir")
    if resume is None and holds_run(run_dir):
        if not RunDir(run_dir).can_resume():  # nothing to resume from: say so
            raise UserError(f"{run_dir} holds a run that ended before its first checkpoint "
                            f"(its metrics and log are kept); choose another hydra.run.dir, "
                            f"or delete {run_dir} to start over there")
        raise UserError(f"{run_dir} already holds a run; continue it with "
                        f"`{resume_command(run_dir, None)}` or choose another hydra.run.dir")


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the lock of `run_dir` for the duration of the block (see the module docstring)."""
    path = _key(RunDir(run_dir).lock)
    if path in _HELD:
        fd, count = _HELD[path]
        _HELD[path] = (fd, count + 1)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        _HELD[path] = (_acquire(path), 1)
    try:
        yield
    finally:
        fd, count = _HELD[path]
        if count > 1:
            _HELD[path] = (fd, count - 1)
        else:
            del _HELD[path]
            _release(path, fd)


def _open_lock(path: Path, tries: int = 3) -> int:
    """Open (create) the lock file. A failed start's `remove_empty` may take the run folder
    between `run_lock`'s mkdir and this open: the folder is then made again (a few times at
    most); any other failure (a dangling `.lock` link) is one line."""
    for _ in range(tries):
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError as exc:
            if path.parent.is_dir():  # not the folder: the lock path itself cannot be made
                raise UserError(f"cannot open the lock file {path}: {exc.strerror}; remove it "
                                "if no run uses this folder") from exc
            with contextlib.suppress(FileNotFoundError):  # a parent went too: next try
                path.parent.mkdir(parents=True, exist_ok=True)
    raise UserError(f"cannot open the lock file {path}: its folder keeps disappearing")


def _acquire(path: Path) -> int:
    """Open, flock and stamp the lock file; refuse when a live process holds it."""
    while True:
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise _in_use(path, holder) from None
        except OSError as exc:  # a filesystem without locks: fall back to the stamp alone
            log.warning("cannot lock %s (%s); two runs into this folder are not prevented",
                        path, exc.strerror)
        if _same_file(fd, path):  # not a file a releasing run unlinked after we opened it
            break
        os.close(fd)
    previous = _read_holder(fd)
    if previous != "holder unknown":
        log.warning("taking over the lock of a run that ended without releasing it (%s)", previous)
    stamp = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                        "since": time.strftime("%Y-%m-%d %H:%M:%S")})
    os.ftruncate(fd, 0)
    os.pwrite(fd, stamp.encode(), 0)
    return fd


def check_not_live(run_dir: Path) -> None:
    """Refuse (one line) a folder a live run holds, without taking its lock or writing: a
    `resume=` of a live run is refused as such, also before that run wrote a checkpoint."""
    path = _key(RunDir(run_dir).lock)
    if path in _HELD:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file: no live run
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released when fd closes
    except BlockingIOError:
        raise _in_use(path, _read_holder(fd)) from None
    except OSError:  # a filesystem without locks: `run_lock` warns when the run starts
        pass
    finally:
        os.close(fd)


def _in_use(path: Path, holder: str) -> UserError:
    return UserError(f"{path.parent} is in use by a live run ({holder}); wait for it, stop it "
                     f"with `touch {path.parent / 'STOP'}`, or choose another hydra.run.dir")


def _release(path: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {info['pid']} on host {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
