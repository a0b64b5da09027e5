"""`metrics.csv` in long format: one `step,time,name,value` row per scalar."""

from __future__ import annotations

import csv
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rltrain.types imports torch; `rltrain report` and its Hydra callback need none
    from rltrain.types import Metrics

log = logging.getLogger("rltrain")
HEADER = ["step", "time", "name", "value"]


class CSVLogger:
    """Long format keeps one stable header although each log step carries different metrics."""

    def __init__(self, path: Path, purge_step: int = 0):
        path.parent.mkdir(parents=True, exist_ok=True)
        if purge_step and path.exists():
            _truncate_after(path, purge_step)
        new = not path.exists()
        self._file = open(path, "a", newline="")  # append: a resumed run continues the file
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(HEADER)
        self._t0 = time.time()

    def log(self, metrics: Metrics, step: int) -> None:
        now = f"{time.time():.3f}"
        self._writer.writerows([step, now, k, repr(float(v))] for k, v in metrics.items())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@dataclass
class MetricsFile:
    """What `read_metrics` found in a `metrics.csv`."""

    columns: list[str] | None = None
    """The first line's fields (None for an empty file); `HEADER` in a file rltrain wrote."""
    rows: list[list[str]] = field(default_factory=list)
    """Well-formed rows: a whole-number step, a numeric time, a name and a numeric value."""
    dropped: int = 0
    """Non-empty lines, the header aside, that are not well-formed (torn by a kill, garbage)."""


def read_metrics(path: Path) -> MetricsFile:
    """Read `path` line by line, keeping the well-formed rows; never raises on bad content."""
    out = MetricsFile()
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        lines = [line.rstrip("\r") for line in f.read().split("\n") if line.strip()]
    for i, line in enumerate(lines):
        row = _parse(line)
        if i == 0:
            out.columns = row if row is not None else [line[:60]]
            if row == HEADER:
                continue
        if row is not None and _well_formed(row):
            out.rows.append(row)
        else:
            out.dropped += 1
    return out


def _parse(line: str) -> list[str] | None:
    try:
        return next(csv.reader([line.replace("\0", "")]), None)
    except csv.Error:  # e.g. a field larger than csv's limit
        return None


def _well_formed(row: list[str]) -> bool:
    """`step,time,name,value` with a whole-number step and numeric time and value."""
    if len(row) != 4 or not row[2]:
        return False
    try:
        int(row[0]), float(row[1]), float(row[3])
    except ValueError:
        return False
    return True


def _truncate_after(path: Path, step: int) -> None:
    """Drop rows logged after `step` (by a run that is now resumed from that step), and every
    line that is not a well-formed row (with one warning saying how many)."""
    found = read_metrics(path)
    kept = [row for row in found.rows if int(row[0]) <= step]
    if found.dropped:
        log.warning("%s: dropped %d malformed line(s) while resuming; kept its %d good rows "
                    "up to step %s", path, found.dropped, len(kept), f"{step:,}")
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows([HEADER, *kept])
    tmp.replace(path)
