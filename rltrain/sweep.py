"""Sweeps: optional Hydra plugins, the Optuna study of `+hpo=` presets, K seeds a trial, threads.

Hydra runs the jobs; this module only adds what rltrain needs around them: one clear line when a
sweeper or launcher plugin is missing, a study that an interrupted search continues, a trial
that averages several seeds, and torch thread counts that keep parallel jobs off each other's
cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, read_write

from rltrain.config import TrainConfig
from rltrain.errors import UserError
from rltrain.run_dir import RunDir, seed_overrides

log = logging.getLogger("rltrain")

# (config group, option) -> (module the plugin installs, what to `pip install` for it)
PLUGINS: dict[tuple[str, str], tuple[str, str]] = {
    ("hydra/sweeper", "optuna"): ("hydra_plugins.hydra_optuna_sweeper", '"rltrain[sweep]"'),
    ("hpo", "*"): ("hydra_plugins.hydra_optuna_sweeper", '"rltrain[sweep]"'),
    ("hydra/launcher", "joblib"): ("hydra_plugins.hydra_joblib_launcher", '"rltrain[sweep]"'),
    ("hydra/launcher", "submitit_local"): ("hydra_plugins.hydra_submitit_launcher",
                                           '"rltrain[slurm]"'),
    ("hydra/launcher", "submitit_slurm"): ("hydra_plugins.hydra_submitit_launcher",
                                           '"rltrain[slurm]"'),
    ("hydra/launcher", "ray"): ("hydra_plugins.hydra_ray_launcher", '"rltrain[ray]"'),
    ("hydra/launcher", "ray_aws"): ("hydra_plugins.hydra_ray_launcher", '"rltrain[ray]"'),
    ("hydra/sweeper", "nevergrad"): ("hydra_plugins.hydra_nevergrad_sweeper",
                                     "hydra-nevergrad-sweeper"),
    ("hydra/sweeper", "ax"): ("hydra_plugins.hydra_ax_sweeper", "hydra-ax-sweeper"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def check_plugins(argv: list[str]) -> None:
    """Raise a one-line `UserError` naming the extra to install when a chosen plugin is missing."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep:
            continue
        module, install = PLUGINS.get((key, value)) or PLUGINS.get((key, "*")) or (None, None)
        if module is None:
            continue
        if not _installed(module):
            name = module.rpartition(".")[2].replace("_", "-")
            raise UserError(f"{key}={value} needs the Hydra plugin {name}: pip install {install}")
        if key == "hpo":
            _check_sqlalchemy()
        if value == "submitit_slurm" and shutil.which("srun") is None:
            raise UserError("hydra/launcher=submitit_slurm submits to SLURM, but srun is not on "
                            "this machine: run it on the cluster, or try "
                            "hydra/launcher=submitit_local")


def _check_sqlalchemy() -> None:
    """optuna 2.10 (the one hydra-optuna-sweeper allows) cannot use SQLite with SQLAlchemy 2."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("sqlalchemy").split(".")[0])
    except PackageNotFoundError:
        major = 0
    if major >= 2:
        raise UserError("the study's SQLite storage needs sqlalchemy<2 with optuna 2.10 "
                        f'(found sqlalchemy {version("sqlalchemy")}): pip install "rltrain[sweep]"')


def sqlite_folder(storage: Any) -> Path | None:
    """The folder of a `sqlite:///<path>` storage URL (None for other storages)."""
    text = "" if storage is None else str(storage)
    if not text.startswith("sqlite:///"):
        return None
    return Path(text[len("sqlite:///"):]).parent


def stored_trials(storage: Any, study_name: str | None) -> tuple[int, int]:
    """(all trials, completed trials) of a stored study; (0, 0) when there is none yet.

    Trials still marked running were cut short by an interrupted invocation (one invocation at
    a time uses a study): they are marked failed, so the sampler and the count ignore them.
    """
    import optuna

    if storage is None or study_name is None:
        return 0, 0
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=str(storage))
    except KeyError:  # optuna 2.x: no study of that name in this storage yet
        return 0, 0
    states = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    for trial in trials:
        if trial.state == states.RUNNING:
            study.tell(trial.number, state=states.FAIL)
            log.info("trial %d was interrupted: marked failed", trial.number)
    return len(trials), sum(t.state == states.COMPLETE for t in trials)


class ResumeStudy(Callback):
    """Hydra callback of the `+hpo=` presets: create the study's folder, and when the study
    already exists run only the trials it still lacks (`n_trials` counts the whole study)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Runs before Hydra builds the sweeper from the same `config`."""
        sweeper = config.hydra.sweeper
        folder = sqlite_folder(sweeper.get("storage"))
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        existing, done = stored_trials(sweeper.get("storage"), sweeper.get("study_name"))
        if not existing:
            return
        left = max(int(sweeper.n_trials) - done, 0)
        log.info("resuming study %s: %d of %d trials completed, %d to go",
                 sweeper.study_name, done, sweeper.n_trials, left)
        with read_write(sweeper):
            sweeper.n_trials = left
            if sweeper.sampler.get("seed") is not None:  # else it would repeat the first trials
                sweeper.sampler.seed = int(sweeper.sampler.seed) + existing


def trial_folder(cfg: DictConfig, trial: Any) -> None:
    """Optuna sweeper hook (`custom_search_space`): run each trial in `<sweep>/<trial number>/`.

    Hydra numbers the jobs of every invocation from 0; the trial number keeps counting across a
    resumed study, so a second invocation never writes into an earlier trial's folder.
    """
    trial.suggest_int("hydra.sweep.subdir", trial.number, trial.number)


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
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

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
    `<run_dir>/seed_<s>/`; returns the mean of their final eval means (what a sweeper sees)."""
    from rltrain.runner.runner import Runner

    means = []
    for seed in trial_seeds(cfg):
        sub = RunDir(run_dir).seed(seed)
        write_seed_record(run_dir, sub.root, seed)
        with log_to(sub.train_log):
            runner = Runner(dataclasses.replace(cfg, seed=seed, seeds_per_trial=1), sub.root)
            result = runner.run()
        if runner.stopper.signum is not None:  # preempted: tell the scheduler, as cli does
            raise SystemExit(128 + runner.stopper.signum)
        means.append(float(result["mean_reward"]))
    mean = sum(means) / len(means)
    summary = {"seeds": trial_seeds(cfg), "mean_rewards": means, "mean_reward": mean}
    RunDir(run_dir).seeds_summary.write_text(json.dumps(summary, indent=2) + "\n")
    log.info("trial mean over %d seeds: %.2f (%s)", len(means), mean,
             ", ".join(f"{m:.2f}" for m in means))
    return mean


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """Also write the log to `path` meanwhile (each seed's folder gets its own train.log); the
    file is created by the first line logged, so a run refused before it writes nothing.

    The file gets rltrain's INFO lines even where the caller's logging hides them (a root
    logger at WARNING, as in an application or under pytest, or rltrain's own logger set
    higher): rltrain's logger is then lowered to INFO meanwhile, and its records reach the
    caller's handlers only at the level the caller had (`_AsBefore`), so the console and the
    caller's own handlers show what they showed before. The same holds for rltrain's loggers
    that the caller's `logging.config.dictConfig` disabled (its `disable_existing_loggers`,
    on by default): enabled meanwhile, for the file only."""
    handler = _FolderFileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s"))
    root, own = logging.getLogger(), logging.getLogger("rltrain")
    root.addHandler(handler)
    muted = _disabled_loggers("rltrain")
    hidden = bool(muted) or own.getEffectiveLevel() > logging.INFO
    saved = (own.level, own.propagate, list(own.handlers))
    if hidden:
        own.handlers = [_AsBefore(own.getEffectiveLevel(), saved[2], saved[1],
                                  {lg.name for lg in muted})]
        own.setLevel(logging.INFO)
        own.propagate = False
        for lg in muted:
            lg.disabled = False
    try:
        yield
    finally:
        if hidden:
            own.handlers = saved[2]
            own.setLevel(saved[0])
            own.propagate = saved[1]
            for lg in muted:
                lg.disabled = True
        root.removeHandler(handler)
        handler.close()


def _disabled_loggers(name: str) -> list[logging.Logger]:
    """The logger `name` and those below it that are disabled (what `dictConfig` does to the
    loggers that exist when it runs and that its config does not name)."""
    return [lg for key, lg in list(logging.root.manager.loggerDict.items())
            if isinstance(lg, logging.Logger) and lg.disabled
            and (key == name or key.startswith(name + "."))]


class _AsBefore(logging.Handler):
    """rltrain's logger while it is lowered to INFO for the run files (`log_to`), standing in
    for its own handlers and its propagation: a record at the caller's level goes where it
    went before (the logger's handlers, then the root's when it propagated), and every record
    goes to the run files. Records of `muted` loggers (disabled by the caller) go to the run
    files only."""

    def __init__(self, threshold: int, handlers: list[logging.Handler], propagate: bool,
                 muted: set[str]):
        super().__init__()
        self.threshold, self.handlers, self.propagate = threshold, handlers, propagate
        self.muted = muted

    def emit(self, record: logging.LogRecord) -> None:
        root = logging.getLogger()
        shown = record.levelno >= self.threshold and record.name not in self.muted
        if shown:
            for h in self.handlers:
                if record.levelno >= h.level:
                    h.handle(record)
        if shown and self.propagate:
            root.handle(record)  # the run files are among the root's handlers
            return
        for h in root.handlers:
            if isinstance(h, _FolderFileHandler):
                h.handle(record)


class _FolderFileHandler(logging.FileHandler):
    """A `FileHandler` opened (with its folder) at its first record, not at construction."""

    def __init__(self, path: Path):
        super().__init__(path, delay=True)

    def _open(self):  # noqa: ANN202 - logging's own signature
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


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
