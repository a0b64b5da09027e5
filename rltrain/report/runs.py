"""Finding run folders below a folder and reading their eval curves, overrides and timings.

A run folder holds `metrics.csv` (long format `step,time,name,value`) or TensorBoard events in
`tb/`; the CSV is read when both exist, the events (with tensorboard's own reader) otherwise.
Its `.hydra/overrides.yaml` names the group it belongs to: the overrides minus the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rltrain.checkpoint.run_dir import METRICS_CSV, TB, TB_EVENTS_GLOB, RunDir
from rltrain.errors import UserError
from rltrain.loggers.csv import HEADER, read_metrics

EVAL_TAG = "eval/mean_reward"
WALL_CLOCK_TAG = "final/wall_clock_s"
"""Seconds of one completed training process (`runner.final_metrics`)."""
EVAL_STD_TAG = "eval/std_reward"
TRAIN_TAG = "episode/mean_reward"
# Overrides that do not change what a run learns: runs differing only in these form one group.
UNGROUPED = ("seed", "seeds_per_trial", "num_seeds", "progress", "resume")


@dataclass
class Scalars:
    """Logged scalars of one run: name -> (steps, values), plus first/last wall-clock times."""

    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    first_time: float | None = None
    last_time: float | None = None
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Every logged row's wall-clock time, sorted."""
    wall_clocks: list[tuple[float, float]] = field(default_factory=list)
    """(when, seconds) of each `final/wall_clock_s` row: one per completed process."""
    dropped: int = 0
    """Malformed lines skipped while reading (a torn last line of a killed run, or garbage)."""

    def get(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of `name`, empty arrays when it was never logged."""
        return self.series.get(name, (np.zeros(0, dtype=np.int64), np.zeros(0)))


@dataclass
class Run:
    """One run folder: its eval curve and what is needed to group and summarize it."""

    path: Path
    overrides: list[str]
    seed: int | None
    scalars: Scalars
    start_time: float | None = None

    @property
    def eval_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(env steps, eval mean return) of every evaluation, in step order."""
        return self.scalars.get(EVAL_TAG)

    @property
    def final(self) -> float:
        """Mean return of the last evaluation (NaN without any)."""
        values = self.eval_curve[1]
        return float(values[-1]) if len(values) else float("nan")

    @property
    def env_steps(self) -> int:
        """The last env step anything was logged at."""
        steps = [s[-1] for s, _ in self.scalars.series.values() if len(s)]
        return int(max(steps)) if steps else 0

    @property
    def wall_clock(self) -> float:
        """Training seconds of every process that trained the run (see `training_seconds`); the
        first one from the run's start (its `.hydra/` record, when it is older than the first
        log: a copied folder's record is newer than its logs)."""
        s = self.scalars
        if not len(s.times):
            return float("nan")
        start = s.times[0] if self.start_time is None else min(self.start_time, s.times[0])
        return training_seconds(s.times, s.wall_clocks, start)

    @property
    def group(self) -> str:
        """The run's overrides minus the seed: runs with the same group differ only by seed."""
        if not RunDir(self.path).is_hydra_run():
            return f"({self.path.name})"
        kept = [o for o in self.overrides if o.lstrip("+~").partition("=")[0] not in UNGROUPED]
        return " ".join(sorted(kept)) or "(defaults)"


def training_seconds(times: np.ndarray, wall_clocks: list[tuple[float, float]],
                     start: float) -> float:
    """Seconds spent training: each completed process's `final/wall_clock_s`, plus, for the logs
    outside those processes (one stopped by Ctrl-C, killed, or still running), the span from the
    first to the last log of each stretch of them; the idle time between processes is not
    counted. `times`: every log's time, sorted; `start`: the run's start, which the first
    stretch counts from. Two processes that both ended without completing read as one stretch
    (the time between them counted)."""
    covered = [(when - seconds - 1.0, when + 1.0) for when, seconds in wall_clocks]
    total = sum(seconds for _, seconds in wall_clocks)
    stretch: list[float] = []
    for t in (*times, None):
        if t is not None and not any(lo <= t <= hi for lo, hi in covered):
            stretch.append(t)
            continue
        if stretch:
            first = min(start, stretch[0]) if stretch[0] == times[0] else stretch[0]
            total += stretch[-1] - first
            stretch = []
    return max(total, 0.0)


def find_runs(folder: Path) -> list[Path]:
    """Every run folder at or below `folder` (a sweep, a day, or `outputs/`), sorted."""
    found = {p.parent for p in folder.rglob(METRICS_CSV)}
    found |= {p.parent.parent for p in folder.rglob(TB_EVENTS_GLOB) if p.parent.name == TB}
    return sorted(found)


def load_run(path: Path) -> Run:
    """Read one run folder; a file that cannot be read is a one-line `UserError` naming it."""
    run = RunDir(path)
    overrides = _load_yaml(run.hydra_overrides, list) or []
    for record in resume_records(path):
        overrides = with_resumed(overrides, _load_yaml(record, list) or [])
    config = _load_yaml(run.hydra_config, dict) or {}
    seed = config.get("seed") if isinstance(config.get("seed"), int) else None
    start = run.hydra_config.stat().st_mtime if run.hydra_config.is_file() else None
    scalars = read_csv(run.metrics_csv) if run.metrics_csv.is_file() else read_tensorboard(run.tb)
    return Run(path, [str(o) for o in overrides], seed, scalars, start)


def resume_records(path: Path) -> list[Path]:
    """The `.hydra/resume/overrides.yaml` records of the run in `path`, oldest first: its own,
    and, for a seed of a `num_seeds` batch (`<batch>/seed_<s>/`), the batch's, where
    `resume=<batch>` records the overrides of all its seeds."""
    records = [RunDir(path).resume_overrides]
    if path.name.removeprefix("seed_").isdigit():
        records.append(RunDir(path.parent).resume_overrides)
    return sorted((r for r in records if r.is_file()), key=lambda r: r.stat().st_mtime_ns)


def with_resumed(overrides: list[Any], resumed: list[Any]) -> list[Any]:
    """The run's overrides with those of its latest resume in place of the same keys
    (`total_timesteps=4096`, resumed with `total_timesteps=6000`: the run trained 6,000)."""
    def key(o: Any) -> str:
        return str(o).lstrip("+~").partition("=")[0]

    again = {key(o) for o in resumed}
    return [o for o in overrides if key(o) not in again] + list(resumed)


def _load_yaml(path: Path, kind: type) -> Any:
    """The YAML document in `path` (None when there is no file), which must be a `kind`."""
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: not readable YAML ({first})") from exc
    if data is not None and not isinstance(data, kind):
        raise UserError(f"{path}: expected a YAML {'list' if kind is list else 'mapping'}, "
                        f"found a {type(data).__name__}")
    return data


def read_csv(path: Path) -> Scalars:
    """Scalars of a long-format `metrics.csv`; a step logged twice keeps its last value.

    Malformed lines are skipped and counted (`Scalars.dropped`); a file whose header is not
    `step,time,name,value` is a one-line `UserError`.
    """
    try:
        found = read_metrics(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if found.columns not in (None, HEADER):
        shown = ",".join(found.columns)[:60]
        raise UserError(f"{path}: unexpected columns {shown!r}; expected {','.join(HEADER)}")
    points: dict[str, dict[int, float]] = {}
    for step, _, name, value in found.rows:
        points.setdefault(name, {})[int(step)] = float(value)
    scalars = _scalars(points, [float(row[1]) for row in found.rows],
                       [(float(t), float(v)) for _, t, name, v in found.rows
                        if name == WALL_CLOCK_TAG])
    scalars.dropped = found.dropped
    return scalars


def read_tensorboard(tb_dir: Path) -> Scalars:
    """Scalars of the TensorBoard events in `tb_dir`, read with tensorboard's EventAccumulator."""
    # start-up: tensorboard (most of a second) only for runs without metrics.csv
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not tb_dir.is_dir():
        return Scalars()
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    points: dict[str, dict[int, float]] = {}
    times, wall_clocks = [], []
    for tag in acc.Tags().get("scalars", []):
        for event in acc.Scalars(tag):
            points.setdefault(tag, {})[int(event.step)] = float(event.value)
            times.append(float(event.wall_time))
            if tag == WALL_CLOCK_TAG:
                wall_clocks.append((float(event.wall_time), float(event.value)))
    return _scalars(points, times, wall_clocks)


def _scalars(points: dict[str, dict[int, float]], times: list[float],
             wall_clocks: list[tuple[float, float]] | None = None) -> Scalars:
    series = {}
    for name, by_step in points.items():
        steps = np.array(sorted(by_step), dtype=np.int64)
        series[name] = (steps, np.array([by_step[s] for s in steps], dtype=np.float64))
    ordered = np.sort(np.asarray(times, dtype=np.float64))
    return Scalars(series, min(times) if times else None, max(times) if times else None,
                   ordered, sorted(wall_clocks or []))
