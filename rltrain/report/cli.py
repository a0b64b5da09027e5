"""`rltrain report <folder>`, and the Hydra callback that writes the same report after a sweep."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from rich.console import Console

from rltrain.errors import UserError
from rltrain.report.plot import GROUP_CURVES, plot_groups
from rltrain.report.runs import Run, find_runs, load_run
from rltrain.report.study import BEST_TRIAL, write_study_report
from rltrain.report.table import GroupSummary, print_table, summarize, write_csv

log = logging.getLogger("rltrain")
REPORT_CSV = "report.csv"


def report_main(argv: list[str]) -> list[GroupSummary]:
    """Parse `rltrain report` arguments, write the report and print its table."""
    parser = argparse.ArgumentParser(
        prog="rltrain report",
        description="Group every run below FOLDER by its overrides minus the seed; print a "
                    f"table and write {REPORT_CSV} and {GROUP_CURVES}. For an Optuna search "
                    f"(FOLDER/optuna.db) also write its history, parameter-importance and "
                    f"parallel-coordinate plots and {BEST_TRIAL}, the best trial as one command.")
    parser.add_argument("folder", nargs="?", default="outputs",
                        help="a sweep, a day, or outputs/ (default: outputs)")
    parser.add_argument("--out", default=None,
                        help="where report.csv and learning_curves.png go (default: FOLDER)")
    args = parser.parse_args(argv)
    return write_report(Path(args.folder), Path(args.out) if args.out else None)


def write_report(folder: Path, out: Path | None = None, console: Any = None) -> list[GroupSummary]:
    """Report on every run below `folder`: print the table, write the CSV and the curves PNG."""
    if not folder.is_dir():
        raise UserError(f"report: folder {folder} does not exist")
    if console is None:  # not a terminal: rich would wrap the table at 80 columns
        console = Console() if Console().is_terminal else Console(width=160)
    found = find_runs(folder)
    if not found:
        raise UserError(f"report: no runs below {folder} (a run folder has metrics.csv or tb/)")
    runs = load_runs(found, console)
    if not runs:
        raise UserError(f"report: none of the {len(found)} run(s) below {folder} could be read")
    evaluated = [r for r in runs if len(r.eval_curve[0])]
    if len(evaluated) < len(runs):
        console.print(f"skipped {len(runs) - len(evaluated)} run(s) without an evaluation yet: "
                      + ", ".join(str(r.path) for r in runs if r not in evaluated))
    if not evaluated:
        raise UserError(f"report: no run below {folder} has evaluation results yet")
    groups = summarize(evaluated)
    out = out or folder
    _check_out(out)
    title = f"{folder}: {len(evaluated)} runs in {len(groups)} groups (final eval across seeds)"
    print_table(groups, title, console)
    with _writing(out):
        csv_path = write_csv(groups, out / REPORT_CSV, folder)
        png_path = plot_groups([(g.label, g.runs) for g in groups], out / GROUP_CURVES,
                               f"{folder}: eval return, mean and 95% bootstrap CI across seeds")
    console.print(f"table:  {csv_path}\ncurves: {png_path}")
    with _writing(out):
        study = write_study_report(folder, out)
    if study:
        console.print("study:  " + "\n        ".join(str(p) for p in study))
        best = out / BEST_TRIAL
        if best.is_file():
            console.print(best.read_text().strip(), markup=False, highlight=False, soft_wrap=True)
    return groups


_CHOOSE = "choose a writable folder with --out <folder>"


def _check_out(out: Path) -> None:
    """Refuse (one line) an output folder the report cannot write into, before anything is
    printed: a file where a folder should be, or a read-only folder (a finished sweep kept
    read-only is read, never written into)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # mkdir of an existing file
        raise UserError(f"report: --out {out} is a file, not a folder; {_CHOOSE}") from exc
    except OSError as exc:  # a file on the way (NotADirectoryError), no permission, ...
        raise UserError(f"report: cannot create the output folder {out}: "
                        f"{exc.strerror or exc}; {_CHOOSE}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UserError(f"report: cannot write into {out} (read-only); {_CHOOSE}")


@contextlib.contextmanager
def _writing(out: Path) -> Iterator[None]:
    """A write into `out` that fails all the same (root squashed on NFS, a full disk, a
    read-only mount `os.access` did not see) is one line naming the file."""
    try:
        yield
    except OSError as exc:
        where = exc.filename or out
        raise UserError(f"report: cannot write {where}: {exc.strerror or exc}; "
                        f"{_CHOOSE}") from exc


def load_runs(paths: list[Path], console: Any) -> list[Run]:
    """The runs of `paths` that can be read; one warning line for each that cannot (naming the
    file) and for each file of which malformed lines were skipped."""
    runs = []
    for path in paths:
        try:
            run = load_run(path)
        except UserError as exc:
            console.print(f"warning: skipped run {path}: {exc}", markup=False, highlight=False,
                          soft_wrap=True)
            continue
        if run.scalars.dropped:
            console.print(f"warning: {path / 'metrics.csv'}: skipped {run.scalars.dropped} "
                          f"malformed line(s)", markup=False, highlight=False,
                          soft_wrap=True)
        runs.append(run)
    return runs


class SweepSummary(Callback):
    """Hydra callback: after a multirun, write the report of its sweep folder into that folder."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """Summarize the sweep that just ended (a failure only logs a warning)."""
        folder = Path(str(config.hydra.sweep.dir))
        try:
            write_report(folder)
        except UserError as exc:
            log.warning("no sweep summary: %s", exc)
