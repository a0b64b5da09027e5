"""Summaries of run groups: the numbers, the rich table and `report.csv`."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from rltrain.report.runs import Run
from rltrain.report.stats import bootstrap_ci, iqm, mean_std

CSV_COLUMNS = ("group", "runs", "final_mean", "final_std", "iqm", "iqm_ci_low", "iqm_ci_high",
               "best", "env_steps", "wall_clock_s", "seeds", "run_dirs")


@dataclass
class GroupSummary:
    """One group of runs (same overrides but the seed) and its statistics across seeds."""

    label: str
    runs: list[Run]
    final_mean: float
    final_std: float
    iqm: float
    iqm_ci: tuple[float, float]
    best: float
    env_steps: int
    wall_clock: float


def group_runs(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs keyed by their group, in the order groups first appear."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    return groups


def summarize(runs: list[Run]) -> list[GroupSummary]:
    """One summary per group of runs with evaluation results, best IQM first."""
    out = []
    for label, members in group_runs(runs).items():
        finals = np.array([r.final for r in members])
        mean, std = mean_std(finals)
        lo, hi = bootstrap_ci(finals)
        walls = [r.wall_clock for r in members if math.isfinite(r.wall_clock)]
        out.append(GroupSummary(
            label=label, runs=members, final_mean=mean, final_std=std,
            iqm=float(iqm(finals)), iqm_ci=(float(lo), float(hi)), best=float(finals.max()),
            env_steps=int(np.mean([r.env_steps for r in members])),
            wall_clock=float(np.mean(walls)) if walls else float("nan")))
    return sorted(out, key=lambda g: -g.iqm)


def format_duration(seconds: float) -> str:
    """`1h02m`, `3m05s`, `12.3s`; `-` when unknown."""
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    if seconds >= 60:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{seconds:.1f}s"


def print_table(groups: list[GroupSummary], title: str, console: object = None) -> None:
    """Print the groups as a rich table."""
    table = Table(title=title, title_justify="left")
    table.add_column("group", overflow="fold", ratio=3)
    for col in ("runs", "final eval (mean ± std)", "IQM [95% CI]", "best", "env steps",
                "wall-clock"):
        table.add_column(col, justify="right")
    for g in groups:
        spread = f" ± {g.final_std:.2f}" if len(g.runs) > 1 else ""  # no sample std of one
        table.add_row(g.label, str(len(g.runs)), f"{g.final_mean:.2f}{spread}",
                      f"{g.iqm:.2f} [{g.iqm_ci[0]:.2f}, {g.iqm_ci[1]:.2f}]", f"{g.best:.2f}",
                      f"{g.env_steps:,}", format_duration(g.wall_clock))
    (console or Console()).print(table)


def write_csv(groups: list[GroupSummary], path: Path, root: Path) -> Path:
    """Write one row per group to `path`; run folders are given relative to `root`."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for g in groups:
            dirs = ";".join(_relative(r.path, root) for r in g.runs)
            seeds = ";".join("" if r.seed is None else str(r.seed) for r in g.runs)
            std = g.final_std if len(g.runs) > 1 else ""  # no sample std of one run
            writer.writerow([g.label, len(g.runs), g.final_mean, std, g.iqm, *g.iqm_ci,
                             g.best, g.env_steps, g.wall_clock, seeds, dirs])
    return path


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve())) or "."
    except ValueError:
        return str(path)
