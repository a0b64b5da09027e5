"""Where a run's wall-clock goes: cumulative seconds per loop section, logged as `time/*`."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from rltrain.types import Metrics


class SectionTimer:
    """Cumulative seconds per named section (`env`, `act`, `update`, `eval`, `checkpoint`, `log`).

    The loops time their own sections; the Runner times evaluation, checkpoints and logging.
    `metrics()` gives `time/<section>_s` and `time/<section>_frac` (share of the timed total), so
    a TensorBoard glance shows what to speed up first.
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    def add(self, section: str, seconds: float) -> None:
        """Add `seconds` to `section`."""
        self.totals[section] += seconds

    @contextmanager
    def __call__(self, section: str) -> Iterator[None]:
        """`with timer("eval"): ...` adds the block's wall-clock time to `eval`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[section] += time.perf_counter() - start

    def metrics(self) -> Metrics:
        """`time/<section>_s` (cumulative) and `time/<section>_frac` for every section so far."""
        total = sum(self.totals.values())
        out: Metrics = {}
        for name, seconds in self.totals.items():
            out[f"time/{name}_s"] = seconds
            out[f"time/{name}_frac"] = seconds / total if total > 0 else 0.0
        return out
