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

from rltrain.errors import UserError
from rltrain.loggers.csv import HEADER, read_metrics
from rltrain.run_dir import METRICS_CSV, TB, TB_EVENTS_GLOB, RunDir

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
        """Training seconds: the sum of the `final/wall_clock_s` each completed process logged
        (a resumed run's idle time between them is not counted); a run without one, from its
        start (its `.hydra/` record or its first log, the earlier: a copied folder's record is
        newer than its logs) to its last log."""
        seconds = self.scalars.get(WALL_CLOCK_TAG)[1]
        if len(seconds):
            return float(seconds.sum())
        starts = [t for t in (self.start_time, self.scalars.first_time) if t is not None]
        if not starts or self.scalars.last_time is None:
            return float("nan")
        return max(self.scalars.last_time - min(starts), 0.0)

    @property
    def group(self) -> str:
        """The run's overrides minus the seed: runs with the same group differ only by seed."""
        if not RunDir(self.path).is_hydra_run():
            return f"({self.path.name})"
        kept = [o for o in self.overrides if o.lstrip("+~").partition("=")[0] not in UNGROUPED]
        return " ".join(sorted(kept)) or "(defaults)"


def find_runs(folder: Path) -> list[Path]:
    """Every run folder at or below `folder` (a sweep, a day, or `outputs/`), sorted."""
    found = {p.parent for p in folder.rglob(METRICS_CSV)}
    found |= {p.parent.parent for p in folder.rglob(TB_EVENTS_GLOB) if p.parent.name == TB}
    return sorted(found)


def load_run(path: Path) -> Run:
    """Read one run folder; a file that cannot be read is a one-line `UserError` naming it."""
    run = RunDir(path)
    overrides = with_resumed(_load_yaml(run.hydra_overrides, list) or [],
                             _load_yaml(run.resume_overrides, list) or [])
    config = _load_yaml(run.hydra_config, dict) or {}
    seed = config.get("seed") if isinstance(config.get("seed"), int) else None
    start = run.hydra_config.stat().st_mtime if run.hydra_config.is_file() else None
    scalars = read_csv(run.metrics_csv) if run.metrics_csv.is_file() else read_tensorboard(run.tb)
    return Run(path, [str(o) for o in overrides], seed, scalars, start)


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
    scalars = _scalars(points, [float(row[1]) for row in found.rows])
    scalars.dropped = found.dropped
    return scalars


def read_tensorboard(tb_dir: Path) -> Scalars:
    """Scalars of the TensorBoard events in `tb_dir`, read with tensorboard's EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not tb_dir.is_dir():
        return Scalars()
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    points: dict[str, dict[int, float]] = {}
    times = []
    for tag in acc.Tags().get("scalars", []):
        for event in acc.Scalars(tag):
            points.setdefault(tag, {})[int(event.step)] = float(event.value)
            times.append(float(event.wall_time))
    return _scalars(points, times)


def _scalars(points: dict[str, dict[int, float]], times: list[float]) -> Scalars:
    series = {}
    for name, by_step in points.items():
        steps = np.array(sorted(by_step), dtype=np.int64)
        series[name] = (steps, np.array([by_step[s] for s in steps], dtype=np.float64))
    return Scalars(series, min(times) if times else None, max(times) if times else None)
