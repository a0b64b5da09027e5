"""`metrics.csv` in long format: one `step,time,name,value` row per scalar."""

from __future__ import annotations

import csv
import time
from pathlib import Path

from rltrain.types import Metrics


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
            self._writer.writerow(["step", "time", "name", "value"])
        self._t0 = time.time()

    def log(self, metrics: Metrics, step: int) -> None:
        now = f"{time.time():.3f}"
        self._writer.writerows([step, now, k, repr(float(v))] for k, v in metrics.items())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _truncate_after(path: Path, step: int) -> None:
    """Drop rows logged after `step` (by a run that is now resumed from that step)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    kept = rows[:1] + [r for r in rows[1:] if r and int(r[0]) <= step]
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(kept)
    tmp.replace(path)
