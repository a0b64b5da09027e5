"""Console progress: a rich progress bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

log = logging.getLogger("rltrain")


class ConsoleProgress:
    """Shows env steps, steps/s, recent episode return and ETA. `mode`: auto, bar, plain, off."""

    def __init__(self, total: int, mode: str = "auto", interval: float = 5.0, start: int = 0):
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "plain"
        self.mode, self.total, self.interval = mode, total, interval
        self._t0, self._step0 = time.perf_counter(), start
        self._last_print = self._t0
        self._last_step = -1
        self._progress: Progress | None = None
        if mode == "bar":
            self._progress = Progress(
                TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[sps]:>7} sps"), TextColumn("return {task.fields[ret]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(), transient=False)
            self._task = self._progress.add_task("train", total=total, completed=start,
                                                 sps="-", ret="-")
            self._progress.start()

    def sps(self, step: int) -> float:
        """Mean env steps per second since start."""
        return (step - self._step0) / max(time.perf_counter() - self._t0, 1e-9)

    def update(self, step: int, episode_return: float | None, force: bool = False) -> None:
        """Refresh the bar, or print a plain line every `interval` seconds."""
        ret = "-" if episode_return is None else f"{episode_return:.1f}"
        sps = self.sps(step)
        if self._progress is not None:
            self._progress.update(self._task, completed=step, sps=f"{sps:,.0f}", ret=ret)
            return
        now = time.perf_counter()
        due = force and step != self._last_step or now - self._last_print >= self.interval
        if self.mode == "plain" and due:
            self._last_print, self._last_step = now, step
            eta = max(0, self.total - step) / sps if sps > 0 else float("nan")
            pct = min(100.0, 100 * step / self.total)
            log.info("step %s/%s (%.0f%%) | %s sps | return %s | ETA %s", f"{step:,}",
                     f"{self.total:,}", pct, f"{sps:,.0f}", ret, _hms(eta))

    def close(self) -> None:
        """Stop the live display."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _hms(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def console_handler() -> logging.Handler:
    """Rich log lines on a terminal (they share the progress bar's console), plain ones otherwise."""
    if sys.stdout.isatty():
        from rich.logging import RichHandler

        return RichHandler(show_path=False, markup=False)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s", "%H:%M:%S"))
    return handler
