"""A trial's job: the K seeds of `seeds_per_trial` trained in turn (each in its own complete run
folder, with its own `.hydra/` record), and torch thread counts that keep a launcher's parallel
jobs off each other's cores."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from rltrain.checkpoint.run_dir import RunDir, seed_overrides
from rltrain.config.schema import TrainConfig
from rltrain.errors import UserError
from rltrain.loggers.run_log import log_to
from rltrain.runner.interrupt import disk_full_is_one_line
from rltrain.runner.runner import Runner
from rltrain.sweep.search import SEARCH

log = logging.getLogger("rltrain")


def launcher_threads(launcher: dict[str, Any], cpus: int) -> int:
    """torch threads per job that keep the launcher's parallel jobs within `cpus` cores."""
    target = str(launcher.get("_target_", ""))
    if "joblib" in target:
        n_jobs = int(launcher.get("n_jobs") or -1)
        return max(1, cpus // (cpus if n_jobs < 0 else max(n_jobs, 1)))
    if "submitit" in target:
        return max(1, int(launcher.get("cpus_per_task") or 1))
    if "ray" in target:
        remote = (launcher.get("ray") or {}).get("remote") or {}
        return max(1, int(remote.get("num_cpus") or 1))
    return 0


def fit_threads(cfg: TrainConfig) -> TrainConfig:
    """In a multirun, turn `torch_threads=0` (torch's default: every core) into a fair share."""
    hydra_cfg = HydraConfig.get()
    if cfg.torch_threads > 0 or hydra_cfg.mode != RunMode.MULTIRUN:
        return cfg
    launcher = OmegaConf.to_container(hydra_cfg.launcher, resolve=True)
    threads = launcher_threads(launcher, os.cpu_count() or 1)  # type: ignore[arg-type]
    if threads:
        log.info("torch threads: %d (shared fairly between parallel jobs)", threads)
    return dataclasses.replace(cfg, torch_threads=threads)


def trial_seeds(cfg: TrainConfig) -> list[int]:
    """The seeds one trial trains: `seed, seed + 1, ..., seed + seeds_per_trial - 1`."""
    if cfg.seeds_per_trial < 1:
        raise UserError(f"seeds_per_trial={cfg.seeds_per_trial} must be >= 1")
    return [cfg.seed + i for i in range(cfg.seeds_per_trial)]


def run_seeds(cfg: TrainConfig, run_dir: Path) -> float:
    """Train every seed of a trial in turn, each in its own complete run folder
    `<run_dir>/seed_<s>/`; returns the mean of their final eval means (what a sweeper sees).

    A stop ends the trial at the seed it reached: a signal exits with 128 + its number (as the
    CLI does), also one that came while a seed's final checkpoints were written and other
    seeds are left; a `STOP` file (or a callback) leaves a `seeds.json` naming the stopped
    seed and returns NaN. `seeds.json` is written whole or not at all. A full disk in the
    trial's own files (a seed's `.hydra/` record, `seeds.json`) is one line, as in a run (a
    seed's own run says how to resume that seed)."""
    with disk_full_is_one_line(run_dir, then=TRIAL_AGAIN):
        return _train_seeds(cfg, run_dir)


TRIAL_AGAIN = ("the seeds' run folders are kept; free space, then train the trial again into "
               "another hydra.run.dir (no command resumes a whole trial)")
"""What a full disk in a trial's own files leaves the user to do."""


def _train_seeds(cfg: TrainConfig, run_dir: Path) -> float:
    """`run_seeds`' work (see there)."""
    seeds, means = trial_seeds(cfg), []
    for seed in seeds:
        sub = RunDir(run_dir).seed(seed)
        write_seed_record(run_dir, sub.root, seed)
        with log_to(sub.train_log):
            runner = Runner(dataclasses.replace(cfg, seed=seed, seeds_per_trial=1), sub.root)
            result = runner.run()
        if runner.stopper.signum is not None:  # preempted: tell the scheduler, as cli does
            raise SystemExit(128 + runner.stopper.signum)
        if "stopped" in result:
            _write_summary(run_dir, {"seeds": seeds, "mean_rewards": means, "mean_reward": None,
                                     "score": None, "score_of": "mean",
                                     "stopped": {str(seed): str(result["stopped"])}})
            return float("nan")
        means.append(float(result["mean_reward"]))
        late = getattr(signal.Signals, str(runner.state.stop_reason), None)
        if runner.state.stop and late is not None and seed != seeds[-1]:
            _stop_between_seeds(int(late), seed)
    mean = sum(means) / len(means)
    _write_summary(run_dir, {"seeds": seeds, "mean_rewards": means, "mean_reward": mean,
                             "score": mean, "score_of": "mean"})
    log.info("trial mean over %d seeds: %.2f (%s)", len(means), mean,
             ", ".join(f"{m:.2f}" for m in means))
    return mean


def _stop_between_seeds(signum: int, seed: int) -> NoReturn:
    """A signal came while seed `seed` wrote its final checkpoints: it completed, the trial's
    later seeds are not started."""
    if SEARCH.active:
        SEARCH.stop(signum)
    log.warning("stopped (%s) after seed %d completed; the trial's later seeds were not trained",
                signal.Signals(signum).name, seed)
    raise SystemExit(128 + signum)


def _write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """`seeds.json`, through a temporary file (a stop never leaves half of it). Its `score` is
    what the trial returns, `score_of` says which statistic: here the seeds' `mean` (a
    `num_seeds` batch's `seeds.json` scores the `iqm`, `seed_batch/runner.py`)."""
    path = RunDir(run_dir).seeds_summary
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, path)


def write_seed_record(run_dir: Path, sub: Path, seed: int) -> None:
    """Give a seed's folder its own `.hydra/` (config and overrides with that seed)."""
    src, dst = RunDir(run_dir), RunDir(sub)
    if not src.hydra_config.is_file():
        return
    config = OmegaConf.load(src.hydra_config)
    config.seed, config.seeds_per_trial, config.num_seeds = seed, 1, 1
    overrides = OmegaConf.load(src.hydra_overrides) if src.hydra_overrides.is_file() else []
    dst.write_record(config, seed_overrides(list(overrides), seed))
    if (src.hydra / "hydra.yaml").is_file():  # Hydra's own settings, copied as they are
        (dst.hydra / "hydra.yaml").write_bytes((src.hydra / "hydra.yaml").read_bytes())
