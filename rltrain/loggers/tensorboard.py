"""TensorBoard event files via torch's SummaryWriter: scalars, the run's config as a text table
at step 0, and an HParams entry (flattened config + final metrics) when the run finishes, so the
HParams dashboard compares the runs of a sweep by what differed.

The writer (and TensorBoard, ~0.2 s to import) comes with the first metrics, not before the
run's first env step."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from rltrain.text import dotted

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

    from rltrain.types import Metrics

log = logging.getLogger("rltrain")

OPEN_TRIES = 3
"""Event files a resumed run opens before it takes one whose name sorts after the folder's
others (each retry waits for the next second, the name's first field)."""

FINAL_METRICS = ("final/eval_mean", "final/best_eval", "final/env_steps", "final/wall_clock_s")
"""What a finished run logs once at its last step (the Runner); their arrival writes the HParams
entry, with these as its metrics."""


class TensorBoardLogger:
    """One scalar per metric name; non-finite values are skipped (TensorBoard plots them badly)."""

    def __init__(self, log_dir: Path, purge_step: int = 0, config: dict[str, Any] | None = None):
        self.log_dir, self.purge_step = log_dir, purge_step
        self.hparams = flat_hparams(config or {})
        self._writer: SummaryWriter | None = None

    @property
    def writer(self) -> SummaryWriter:
        """The event file's writer, opened (with the config table at step 0) on first use."""
        if self._writer is None:
            # purge_step hides events logged after the checkpoint a resumed run starts from
            purge = self.purge_step + 1 if self.purge_step else None
            self._writer = open_last(self.log_dir, purge)
            if self.hparams and not self.purge_step:  # a resumed run wrote it when it started
                self._writer.add_text("config", config_table(self.hparams), 0)
        return self._writer

    def log(self, metrics: Metrics, step: int) -> None:
        for name, value in metrics.items():
            if math.isfinite(value):
                self.writer.add_scalar(name, value, step)
        if FINAL_METRICS[0] in metrics:
            self._write_hparams(metrics)

    def _write_hparams(self, metrics: Metrics) -> None:
        final = {name: float(metrics[name]) for name in FINAL_METRICS
                 if name in metrics and math.isfinite(metrics[name])}
        # only the session's start and end: without an experiment summary TensorBoard builds the
        # experiment from every run's session, so the columns of a sweep are the union of its
        # runs' hyperparameters, and those that differ between runs are marked (and shown)

        _, start, end = hparams(self.hparams, final)
        self.writer.file_writer.add_summary(start)
        self.writer.file_writer.add_summary(end)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


def event_files(log_dir: Path) -> set[Path]:
    return set(log_dir.glob("events.out.tfevents.*")) if log_dir.is_dir() else set()


def open_last(log_dir: Path, purge_step: int | None) -> SummaryWriter:
    """A writer whose event file sorts after every event file already in `log_dir`.

    TensorBoard reads a folder's event files in name order, and a resumed run's purge event
    only hides the rows read before it. The name is `<unix second>.<host>.<pid>.<counter>`: a
    run resumed within the second of the last file (or by a process whose pid or counter sorts
    lower as text, 10 < 9) would be read first, and every row after the checkpoint shown twice.
    Such a file, holding only its header, is removed and reopened in the next second."""
    before = event_files(log_dir)
    for _ in range(OPEN_TRIES):
        writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)
        opened = event_files(log_dir) - before
        if not before or not opened or min(opened).name > max(before).name:
            return writer
        writer.close()
        for path in opened:
            path.unlink()
        time.sleep(1.0 - time.time() % 1.0 + 0.01)
    log.warning("%s holds an event file dated in the future; TensorBoard may show the rows "
                "after step %s twice", log_dir, purge_step)
    return SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)


NOT_HPARAMS = ("logger", "progress")
"""Top-level config entries that never change what a run learns (left out of the HParams)."""


def flat_hparams(config: dict[str, Any]) -> dict[str, Any]:
    """`{"algo.lr": 0.0003, "env.id": "CartPole-v1", ...}`: nested sections joined with dots;
    values TensorBoard cannot hold as hyperparameters (lists, None) become their text."""
    kept = {key: value for key, value in config.items() if key not in NOT_HPARAMS}
    return {name: value if isinstance(value, bool | int | float | str) else str(value)
            for name, value in dotted(kept).items()}


def config_table(flat: dict[str, Any]) -> str:
    """A markdown table of the flattened config (TensorBoard's text tab renders it)."""
    bar = "\\|"  # a literal | inside a cell
    rows = [f"| {name} | {str(value).replace('|', bar)} |" for name, value in sorted(flat.items())]
    return "\n".join(["| key | value |", "|---|---|", *rows])
