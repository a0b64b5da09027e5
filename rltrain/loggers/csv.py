"""`metrics.csv` in long format: one `step,time,name,value` row per scalar."""

from __future__ import annotations

import csv
import time
from pathlib import Path

from rltrain.types import Metrics


class CSVLogger:
    """Long format keeps one stable header although each log step carries different metrics."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
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
