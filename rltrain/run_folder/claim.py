"""Where a training run writes: the run folder of a command line, checked before Hydra starts.

A single run gets `hydra.run.dir=` or a fresh `outputs/<date>/<time>[-k]` claimed atomically; a
resumed run continues in its checkpoint's folder (`run_folder/find.py`). Folders that cannot be
written and full disks are refused here, in one line, before Hydra's own first writes.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from rltrain.checkpoint.run_dir import claim_default_run_dir, day_folder
from rltrain.errors import TrainingError, UserError
from rltrain.run_folder.argv import (
    HYDRA_FLAGS,
    arg_value,
    hydra_quoted,
    is_multirun,
    unquote,
    with_overrides,
)


def single_run_dir(argv: list[str]) -> Path | None:
    """The folder a single (not multirun) training run writes to; None for multirun or flags.

    Without `hydra.run.dir=`, Hydra's `outputs/<date>/<time>` is taken, with a `-<k>` suffix
    when a run started in the same second already has it (parallel runs must not share one).
    """
    if is_multirun(argv) or any(a.split("=")[0] in HYDRA_FLAGS for a in argv):
        return None
    given = arg_value(argv, "hydra.run.dir")
    check_free_space(Path(given if given is not None and "${" not in given else "outputs"))
    if given is not None:
        return None if "${" in given else Path(given)
    return claim_default_run_dir()


def claim_run_dir(argv: list[str]) -> tuple[Path | None, list[Path]]:
    """(`single_run_dir(argv)`, the folders claiming it created: the run folder and those of its
    parents that did not exist, innermost first), so that a run failing before its first step
    can leave none of them (`run_folder.lock.clear_failed_start`). ([]: nothing to remove.)"""
    # start-up: only once a run folder is claimed (--help and refused command lines claim none)
    from rltrain.run_folder.lock import new_folders

    given = arg_value(argv, "hydra.run.dir")
    # Hydra's default outputs/<date>/<time> is created by single_run_dir, with its parents
    parents = [] if given is not None else new_folders(Path("outputs") / day_folder())
    target = single_run_dir(argv)
    if target is None:
        return None, []
    return target, (new_folders(target) if given is not None else [target, *parents])


def with_run_dir(argv: list[str], target: Path | str) -> list[str]:
    """`argv` with `hydra.run.dir=<target>` (the folder claimed for it) unless it names one."""
    return argv if arg_value(argv, "hydra.run.dir") is not None else with_overrides(
        argv, [f"hydra.run.dir={hydra_quoted(str(target))}"])


MIN_FREE_BYTES = 1 << 20
"""A run starts only with this much free space: Hydra's own first writes (.hydra/) would
otherwise fail with its traceback. Later shortages are caught by the Runner (one line)."""


def check_free_space(target: Path) -> None:
    """Refuse to start a run on a (nearly) full disk, before anything is written."""

    existing = target.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise TrainingError(f"disk full: {free // 1024} KiB free where {target} lives; free "
                            f"space (a run needs at least {MIN_FREE_BYTES >> 20} MiB to start)")


def check_writable(argv: list[str]) -> None:
    """Refuse an output folder we cannot create or write, before Hydra tries to."""
    keys = ("hydra.run.dir=", "hydra.sweep.dir=")
    target = unquote(next((a.split("=", 1)[1] for a in reversed(argv) if a.startswith(keys)),
                          "outputs"))
    path = Path(target).absolute()
    # 255 bytes: NAME_MAX of ext4, xfs, btrfs, APFS and NTFS; the OS refuses longer names
    long = next((part for part in path.parts if len(os.fsencode(part)) > 255), None)
    if long is not None:
        raise UserError(f"output folder name too long: {long[:16]}... is {len(os.fsencode(long))} "
                        f"bytes, the file system's limit is 255; choose a shorter "
                        f"hydra.run.dir=<folder>")
    while not path.exists() and path != path.parent:
        _check_link(target, path)
        path = path.parent
    if not path.is_dir():
        raise UserError(f"output folder {target} cannot be created: {path} is a file; "
                        f"choose another with hydra.run.dir=<folder>")
    if shutil.disk_usage(path).total == 0:  # /proc, /sys: nothing can be stored there
        raise UserError(f"output folder {target} cannot be created: {path} is a virtual "
                        f"file system; choose another with hydra.run.dir=<folder>")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"output folder {target} is not writable ({path} is read-only); "
                        f"choose another with hydra.run.dir=<folder>")


def _check_link(target: str, path: Path) -> None:
    """Refuse a `path` (on the way to the output folder `target`) that does not exist but is
    there: a symbolic link to nothing, or a loop of links. `mkdir` would fail on it with
    FileExistsError after Hydra started, and a folder made where the link points would be
    somewhere the user did not name."""
    if not os.path.lexists(path):
        return
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            why = "a symbolic link that loops (it points, through links, back to itself)"
        else:
            why = f"a symbolic link to {os.readlink(path)}, which does not exist"
        raise UserError(f"output folder {target} cannot be created: {path} is {why}; fix or "
                        f"remove the link, or choose another hydra.run.dir=<folder>") from exc
