"""What a run shows on the terminal while it trains.

One rich `Console` owns the terminal (`shared_console()`): log records (`console_handler`) and
the live region (progress bar + status panel) both print through it, so rich writes every record
above the live region and redraws the region below it; a record never lands inside the bar.
Off a terminal (CI, `> file`, SLURM logs) there is no live region: a plain status line is logged
every `logger.log_interval` seconds instead.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.text import Text

from rltrain.text import duration, plural

log = logging.getLogger("rltrain")

_console: Console | None = None

SECTIONS = ("env", "act", "update", "eval", "checkpoint")
"""The time split the status panel shows (the `time/*` sections of `SectionTimer`)."""


def shared_console() -> Console:
    """The process's one rich console (it writes to whatever `sys.stdout` is at the time)."""
    global _console
    if _console is None:
        _console = Console()
    return _console


def console_handler() -> logging.Handler:
    """Rich log records on a terminal (through the shared console), plain lines otherwise."""
    if sys.stdout.isatty():
        return RichHandler(console=shared_console(), show_path=False, markup=False,
                           log_time_format="[%X]")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s", "%H:%M:%S"))
    return handler


class RunStatus:
    """What the console reports about a run: steps, speed, returns, evaluations, time split."""

    def __init__(self, total: int, start: int = 0, num_envs: int = 1,
                 timer: Any | None = None, best: float = -math.inf):
        self.total, self.num_envs, self.timer = total, num_envs, timer
        self.step, self.episode_return = start, None
        self._t0, self._step0 = time.perf_counter(), start
        self.paused = 0.0
        """Seconds of one-off pauses left out of the speed (`exclude`)."""
        self.last_eval: tuple[float, float, int, float] | None = None  # mean, std, step, when
        self.best = best

    def elapsed(self) -> float:
        """Seconds since the start (of this process)."""
        return time.perf_counter() - self._t0

    def sps(self, step: int | None = None) -> float:
        """Mean env steps per second since the start (of this process), one-off pauses left
        out: the speed the rest of the run will go at."""
        step = self.step if step is None else step
        return (step - self._step0) / max(self.elapsed() - self.paused, 1e-9)

    def exclude(self, seconds: float) -> None:
        """Leave a one-off pause of `seconds` out of the speed and the ETA (the update's first
        compile: right after a 25 s compile, the ETA read three hours for a run of minutes)."""
        self.paused += max(0.0, seconds)

    def eta(self) -> float:
        """Seconds left at the current mean speed (NaN before the first step)."""
        sps = self.sps()
        return max(0, self.total - self.step) / sps if sps > 0 else math.nan

    def eval_done(self, mean: float, std: float, step: int, best: float) -> None:
        """Record an evaluation and the best mean so far."""
        self.last_eval = (mean, std, step, time.perf_counter())
        self.best = best

    def speed_line(self) -> str:
        """`2,837 steps/s · 8 envs · return 58.6 (recent episodes)`."""
        ret = "-" if self.episode_return is None else f"{self.episode_return:.1f}"
        return (f"{self.sps():,.0f} steps/s · {plural(self.num_envs, 'env')} · "
                f"return {ret} (recent episodes)")

    def eval_line(self) -> str:
        """`eval 275.4 ± 80.9 at step 4,096, 3 s ago · best 500.0` (or `eval -` before one)."""
        if self.last_eval is None:
            text = "eval -"
        else:
            mean, std, step, when = self.last_eval
            ago = duration(time.perf_counter() - when)
            text = f"eval {mean:.1f} ± {std:.1f} at step {step:,}, {ago} ago"
        if math.isfinite(self.best):
            text += f" · best {self.best:.1f}"
        return text

    def time_line(self) -> str:
        """`time env 42% · act 21% · update 33% · eval 3% · checkpoint 1%` of the timed total."""
        # a copy: the live region renders from its own thread while the loop adds sections
        totals = dict(self.timer.totals) if self.timer is not None else {}
        whole = sum(totals.values())
        if whole <= 0:
            return "time -"
        return "time " + " · ".join(f"{name} {100 * totals.get(name, 0.0) / whole:.0f}%"
                                    for name in SECTIONS)

    def plain_line(self) -> str:
        """The off-terminal status line."""
        pct = min(100.0, 100 * self.step / max(self.total, 1))
        return (f"step {self.step:,}/{self.total:,} ({pct:.0f}%) · {self.speed_line()} · "
                f"{self.eval_line()} · ETA {duration(self.eta())}")


class _Panel:
    """The live region: the bar, then three status lines; rendered afresh on every refresh."""

    def __init__(self, status: RunStatus, progress: Progress):
        self.status, self.progress = status, progress

    def __rich__(self) -> RenderableType:
        s = self.status
        lines = [Text("  " + line, style="dim" if i else "", overflow="fold")
                 for i, line in enumerate((s.speed_line(), s.eval_line(), s.time_line()))]
        return Group(self.progress, *lines)


class ConsoleProgress:
    """The run's console status. `mode`: auto (bar on a terminal, plain otherwise), bar, plain, off."""

    def __init__(self, total: int, mode: str = "auto", interval: float = 5.0, start: int = 0,
                 num_envs: int = 1, timer: Any | None = None, best: float = -math.inf):
        if mode == "auto":
            mode = "bar" if sys.stdout.isatty() else "plain"
        self.mode, self.interval = mode, interval
        self.status = RunStatus(total, start, num_envs, timer, best)
        self._last_print, self._last_step = time.perf_counter(), -1
        self._live: Live | None = None
        if mode == "bar":
            self._progress = Progress(
                TextColumn("[bold]train"), BarColumn(bar_width=None), TaskProgressColumn(),
                TextColumn("{task.fields[steps]}"), TextColumn("{task.fields[clock]}"),
                console=shared_console(), expand=True)
            self._task = self._progress.add_task("train", total=total, completed=start,
                                                 steps="", clock="")
            self._refresh_fields()
            self._live = Live(_Panel(self.status, self._progress), console=shared_console(),
                              refresh_per_second=4, redirect_stdout=True, redirect_stderr=True)
            self._live.start()

    def sps(self, step: int) -> float:
        """Mean env steps per second since start."""
        return self.status.sps(step)

    def update(self, step: int, episode_return: float | None, force: bool = False) -> None:
        """Move the bar (the live region redraws itself), or log a plain line when due."""
        self.status.step, self.status.episode_return = step, episode_return
        if self._live is not None:
            self._refresh_fields()
            return
        now = time.perf_counter()
        due = force and step != self._last_step or now - self._last_print >= self.interval
        if self.mode == "plain" and due:
            self._last_print, self._last_step = now, step
            log.info("%s", self.status.plain_line())

    def eval_done(self, mean: float, std: float, step: int, best: float) -> None:
        """Show an evaluation's result (and the best so far) in the status."""
        self.status.eval_done(mean, std, step, best)

    def _refresh_fields(self) -> None:
        s = self.status
        self._progress.update(self._task, completed=s.step, steps=f"{s.step:,}/{s.total:,}",
                              clock=f"{duration(s.elapsed())} · ETA {duration(s.eta())}")

    def close(self) -> None:
        """Draw the live region a last time and leave it on screen."""
        if self._live is not None:
            self._refresh_fields()
            self._live.stop()
            self._live = None
