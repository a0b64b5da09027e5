"""Learning-curve PNGs: one per run (`learning_curve.png`) and one per report (one line per group).

Figures are drawn with matplotlib's object API on the Agg canvas: no pyplot, no GUI backend, no
global state, so it works headless and inside parallel jobs. matplotlib is imported lazily.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.report.runs import EVAL_STD_TAG, TRAIN_TAG, Run, load_run
from rltrain.report.stats import mean_curve

log = logging.getLogger("rltrain")
GROUP_CURVES = "learning_curves.png"


def _axes(title: str, ylabel: str = "eval return") -> tuple[Any, Any]:
    # start-up: matplotlib (about a second) only when a figure is drawn
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=100)  # fixed margins: a layout engine took 40% of a plot
    fig.subplots_adjust(left=0.09, right=0.98, top=0.93, bottom=0.1)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("env steps")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def plot_run(run: Run, path: Path) -> Path:
    """Eval return (± std over its episodes) and training episode return of one run vs env steps."""
    title = f"{run.path.parent.name}/{run.path.name}: {run.group}"
    fig, ax = _axes(title if len(title) <= 110 else title[:107] + "...", "episode return")
    steps, values = run.eval_curve
    _, stds = run.scalars.get(EVAL_STD_TAG)
    ax.plot(steps, values, marker="o", markersize=3, label="eval return (mean over episodes)")
    if len(stds) == len(values):
        ax.fill_between(steps, values - stds, values + stds, alpha=0.2, label="± std over episodes")
    train_steps, train = run.scalars.get(TRAIN_TAG)
    if len(train):
        ax.plot(train_steps, train, alpha=0.6, label="training episode return (last 100)")
    ax.legend(loc="best", fontsize=8)
    fig.savefig(path)
    return path


def plot_groups(groups: Sequence[tuple[str, list[Run]]], path: Path, title: str) -> Path:
    """Mean eval return across each group's seeds with its 95% bootstrap band, one line a group."""
    fig, ax = _axes(title)
    labels = distinct_labels([label for label, _ in groups])
    for label, (_, runs) in zip(labels, groups, strict=True):
        steps, mean, lo, hi = mean_curve([r.eval_curve for r in runs])
        if not len(steps):
            continue
        short = label if len(label) <= 60 else label[:57] + "..."
        (line,) = ax.plot(steps, mean, label=f"{short} (n={len(runs)})")
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.2)
    if ax.lines:
        ax.legend(loc="best", fontsize=7)
    fig.savefig(path)
    return path


def distinct_labels(labels: list[str]) -> list[str]:
    """Group labels without the overrides they all share (legends show what differs)."""
    if len(labels) < 2:
        return labels
    common = set.intersection(*(set(label.split()) for label in labels))
    return [" ".join(w for w in label.split() if w not in common) or label for label in labels]


def write_run_curve(run_dir: Path) -> Path | None:
    """Write `<run_dir>/learning_curve.png` from its logs; never raises (a plot must not fail a
    run). Returns the path, or None when there was nothing to plot or plotting failed."""
    target = RunDir(run_dir).learning_curve
    try:
        run = load_run(Path(run_dir))
        if not len(run.eval_curve[0]):
            return None
        return plot_run(run, target)
    except Exception as exc:  # noqa: BLE001 - plotting is a by-product of training
        log.warning("could not write %s: %s", target, exc)
        return None

