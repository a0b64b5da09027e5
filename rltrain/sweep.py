"""Sweeps: optional Hydra plugins, the Optuna study of `+hpo=` presets, K seeds a trial, threads.

Hydra runs the jobs; this module only adds what rltrain needs around them: one clear line when a
sweeper or launcher plugin is missing, a study that an interrupted search continues, a trial
that averages several seeds, and torch thread counts that keep parallel jobs off each other's
cores.

One live search per study: a search holds the lock of its SQLite study's folder (the run-folder
lock of `rltrain.runner.ownership`), and a second search of the same study is refused in one
line. So a trial still marked running in a study nobody holds was left by a search that
stopped: it is recorded from its folder when its runs completed, else marked failed. A stop
(SIGINT, SIGTERM, a trial's `STOP` file) at any moment of a search exits with 128 + the signal
(0 for `STOP`) and one line saying how to continue; never a traceback, and never a lost trial.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import json
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf, read_write

from rltrain.checkpoint.run_dir import RunDir, seed_overrides
from rltrain.config.schema import TrainConfig
from rltrain.errors import UserError

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


def settle_trials(storage: Any, study_name: str | None, trials_dir: Path | None,
                  direction: Any = None) -> tuple[int, int]:
    """(all trials, completed trials) of a stored study; (0, 0) when there is none yet.

    Called holding the study's lock (`trials_dir`: the sweep folder), so no other search runs
    the study: a trial still marked running was left by a search that stopped. It is recorded
    complete when its folder holds its result (the search stopped after the trial's runs
    completed, before the study heard of it), left running while a live process still trains
    in its folder, and marked failed otherwise (cut short; its folder is kept). Without
    `trials_dir` (a storage other than a local SQLite file, maybe shared with searches on
    other machines) running trials are left as they are. A storage that cannot be read, or a
    `direction` other than the study's, is a one-line `UserError`.
    """
    import optuna

    study = _load_study(storage, study_name, direction)
    if study is None:
        return 0, 0
    states = optuna.trial.TrialState
    for trial in study.get_trials(deepcopy=False, states=(states.RUNNING,)):
        _settle(study, trial, trials_dir)
    trials = study.get_trials(deepcopy=False)
    return len(trials), sum(t.state == states.COMPLETE for t in trials)


def _load_study(storage: Any, study_name: str | None, direction: Any) -> Any:
    """The stored study (None when there is none yet), checked against `direction`."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    if storage is None or study_name is None:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=str(storage))
    except KeyError:  # optuna 2.x: no study of that name in this storage yet
        return None
    except (SQLAlchemyError, RuntimeError, optuna.exceptions.OptunaError) as exc:
        why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise UserError(f"cannot read study {study_name} in {storage}: {why}; choose another "
                        "hydra.sweep.dir") from exc
    wanted = [str(d).rpartition(".")[2].lower() for d in
              (direction if isinstance(direction, (list, tuple, ListConfig)) else [direction])]
    found = [d.name.lower() for d in study.directions]
    if direction is not None and wanted != found:
        raise UserError(f"study {study_name} in {storage} was made to {' and '.join(found)}; "
                        f"hydra.sweeper.direction={','.join(wanted)} cannot continue it: use the "
                        "study's direction, or another hydra.sweep.dir for a new study")
    return study


def _settle(study: Any, trial: Any, trials_dir: Path | None) -> None:
    """Record one trial left running (see `settle_trials`)."""
    from optuna.trial import TrialState

    if trials_dir is None:
        log.info("trial %d is marked running (maybe by a search elsewhere): left as it is",
                 trial.number)
        return
    subdir = trial.params.get("hydra.sweep.subdir")  # `trial_folder`: the trial's own folder
    folder = None if subdir is None else trials_dir / str(int(subdir))
    if folder is not None and _live(folder):
        log.info("trial %d is left running: a live process trains in %s", trial.number, folder)
        return
    value = None if folder is None or len(study.directions) != 1 else trial_value(folder)
    if value is not None and math.isfinite(value):
        study.tell(trial.number, state=TrialState.COMPLETE, values=[value])
        log.info("trial %d had completed before its search stopped: recorded (value %s)",
                 trial.number, f"{value:.6g}")
        return
    study.tell(trial.number, state=TrialState.FAIL)
    log.info("trial %d was cut short: marked failed%s", trial.number,
             f" (its folder {folder} is kept)" if folder is not None and folder.is_dir() else "")


def _live(folder: Path) -> bool:
    """True when a live run holds `folder` or one of its seed folders (`run_lock`)."""
    from rltrain.runner.ownership import check_not_live

    for run in (folder, *sorted(folder.glob("seed_*"))):
        try:
            check_not_live(run)
        except UserError:
            return True
    return False


def trial_value(folder: Path) -> float | None:
    """What a trial's job returned, read back from its folder: the mean in `seeds.json`, or
    the final eval mean in `final.pt` (the mean over the seeds' with `seeds_per_trial=K`).
    None when the trial did not complete (cut short, or stopped); NaN when it completed but
    its value cannot be read."""
    paths = RunDir(folder)
    summary = _read_json(paths.seeds_summary)
    if summary is not None:
        if summary.get("stopped"):
            return None
        value = summary.get("mean_reward")
        return float(value) if isinstance(value, (int, float)) else float("nan")
    config = _read_config(paths.hydra_config)
    if int(config.get("num_seeds") or 1) > 1:  # a batch writes seeds.json however it ends
        return None
    k = int(config.get("seeds_per_trial") or 1)
    if k == 1:
        return _final_value(folder)
    means = [_final_value(paths.seed(int(config.get("seed") or 0) + i).root) for i in range(k)]
    if any(m is None for m in means):
        return None
    return sum(means) / k  # type: ignore[arg-type]


def _unfinished(folder: Path) -> bool:
    """True when a trial's job returned although its runs did not all complete: a `STOP` file
    (or a callback) stopped one. A job that returns always leaves `seeds.json` (several seeds)
    or `final.pt` (one) when they did."""
    summary = _read_json(RunDir(folder).seeds_summary)
    if summary is not None:
        return bool(summary.get("stopped"))
    return not RunDir(folder).final.is_file()


def _final_value(run_dir: Path) -> float | None:
    """The final eval mean of a completed run (`final.pt`), None for a run that did not
    complete, NaN when `final.pt` cannot be read."""
    final = RunDir(run_dir).final
    if not final.is_file():
        return None
    from rltrain.checkpoint import format as checkpoint

    try:
        payload = checkpoint.load(final)
    except UserError:
        return float("nan")
    metrics, counters = payload.get("metrics") or {}, payload.get("counters") or {}
    if "mean_reward" not in metrics or metrics.get("step") != counters.get("global_step"):
        return float("nan")
    return float(metrics["mean_reward"])


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_config(path: Path) -> dict[str, Any]:
    """A run's `.hydra/config.yaml` as plain data ({} when it cannot be read)."""
    try:
        data = OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # noqa: BLE001 - a missing or broken record: nothing to read from it
        return {}
    return data if isinstance(data, dict) else {}


class _Search:
    """The search this process runs, from `ResumeStudy.on_multirun_start` to its end: the lock
    of its study's folder, its stop handlers and the command that continues it.

    A signal that lands in the study's bookkeeping (between trials, or before the first) is
    held until the next safe point: before a trial's job starts, after a job ends, or at the
    search's end. One that lands in a trial's job outside its runs (which handle their own)
    stops at once: the job has written nothing there that a stop could damage. A signal that a
    run took but did not obey (it came while the final checkpoints were written) is seen after
    the job, through a wakeup pipe that every signal writes to, whichever handler takes it.
    """

    def __init__(self) -> None:
        self.active, self.in_job = False, False
        self.signum: int | None = None
        self.command = "the same command"
        self._locks = contextlib.ExitStack()
        self._previous: dict[int, Any] = {}
        self._pipe: tuple[int, int] | None = None
        self._wakeup = -1
        self._registered = False

    def start(self, command: str) -> None:
        """Begin a search: its stop handlers, where this is the main thread."""
        self.end()
        self.active, self.in_job, self.signum, self.command = True, False, None, command
        self._locks = contextlib.ExitStack()
        if not self._registered:  # a search that exits with a trial's SystemExit unlocks too
            atexit.register(self.end)
            self._registered = True
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._pipe = (read, write)
        self._wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def lock(self, folder: Path, study: str) -> None:
        """Make and hold the study's folder for this search; one line when a live search
        holds it."""
        from rltrain.runner.ownership import check_not_live, run_lock

        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror
            raise UserError(f"cannot create the study's folder {folder}: {why}; choose "
                            "another hydra.sweep.dir") from exc
        try:
            check_not_live(folder)
        except UserError:
            raise UserError(f"study {study} in {folder} is in use by a live search "
                            f"({_holder(folder)}); wait for it, stop it (Ctrl-C, or kill -TERM "
                            f"its pid), or choose another hydra.sweep.dir") from None
        self._locks.enter_context(run_lock(folder))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: quit now
        self.signum = signum
        if self.in_job:
            self.stop(signum)
        log.warning("%s received: the search stops before its next trial (Ctrl-C again to "
                    "quit now)", signal.Signals(signum).name)

    def signalled(self) -> int | None:
        """The last SIGINT or SIGTERM delivered since the last call, whoever handled it."""
        data = b""
        while self._pipe is not None:
            try:
                chunk = os.read(self._pipe[0], 512)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        found = [b for b in data if b in (signal.SIGINT, signal.SIGTERM)]
        return found[-1] if found else None

    def stop(self, signum: int | None) -> NoReturn:
        """End the search now: exit 128 + `signum` after one line saying how to continue it
        (`signum` None: a trial's `STOP` file, whose run said it already; exit 0)."""
        if signum is not None:
            log.warning("search stopped (%s); its study and trial folders are kept. Continue "
                        "it with: %s", signal.Signals(signum).name, self.command)
        self.end()
        raise SystemExit(0 if signum is None else 128 + signum)

    def end(self) -> None:
        """Give back the handlers and the study's lock (safe to call twice)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._pipe is not None:
            signal.set_wakeup_fd(self._wakeup)
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None
        self._locks.close()
        self.active = self.in_job = False


_SEARCH = _Search()
"""The search of this process (the launcher's workers run jobs only: theirs stays inactive)."""


def in_search() -> bool:
    """True in the process of a live `+hpo=` search (its runs do not say how to resume them
    alone: the search says how to continue it)."""
    return _SEARCH.active


def preempted(signum: int) -> NoReturn:
    """A run stopped by a signal: exit 128 + it (what schedulers read); inside a search, with
    the one line that continues the search."""
    if _SEARCH.active:
        _SEARCH.stop(signum)
    raise SystemExit(128 + signum)


def _holder(folder: Path) -> str:
    """Who holds `folder`'s lock, from the stamp `run_lock` writes into it."""
    try:
        info = json.loads(RunDir(folder).lock.read_text())
        return f"pid {info['pid']} on host {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


def _continue_command(config: DictConfig) -> str:
    """The command line of the search `config` describes (what continues it)."""
    overrides = config.hydra.get("overrides") or {}
    args = [*(overrides.get("task") or []), *(overrides.get("hydra") or [])]
    return "rltrain " + " ".join(shlex.quote(str(a)) for a in args) if args else "the same command"


def _refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2, as the CLI ends on a `UserError` (raised in a Hydra
    callback, it would reach Hydra's traceback printer instead)."""
    if os.environ.get("RLTRAIN_DEBUG", "") not in ("", "0", "false"):
        raise UserError(message)
    print(f"rltrain: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class ResumeStudy(Callback):
    """Hydra callback of the `+hpo=` presets: lock the study for this search, settle the trials
    an earlier search left running, run only the trials the study still lacks (`n_trials`
    counts the whole study), and stop the search cleanly on a signal or a trial's `STOP`."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Runs before Hydra builds the sweeper from the same `config`."""
        sweeper = config.hydra.sweeper
        storage, name = sweeper.get("storage"), sweeper.get("study_name")
        folder = sqlite_folder(storage)
        _SEARCH.start(_continue_command(config))
        trials_dir = None
        if folder is not None:
            trials_dir = Path(str(OmegaConf.select(config, "hydra.sweep.dir") or folder))
        try:
            if folder is not None:
                _SEARCH.lock(folder, name)
            existing, done = settle_trials(storage, name, trials_dir, sweeper.get("direction"))
        except UserError as exc:
            _SEARCH.end()
            _refuse(str(exc))
        if _SEARCH.signum is not None:
            _SEARCH.stop(_SEARCH.signum)
        if not existing:
            return
        left = max(int(sweeper.n_trials) - done, 0)
        log.info("resuming study %s: %d of %d trials completed, %d to go",
                 sweeper.study_name, done, sweeper.n_trials, left)
        with read_write(sweeper):
            sweeper.n_trials = left
            if sweeper.sampler.get("seed") is not None:  # else it would repeat the first trials
                sweeper.sampler.seed = int(sweeper.sampler.seed) + existing

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A stop held since the last trial ends the search before this trial's job runs."""
        if not _SEARCH.active:  # a launcher's worker process
            return
        _SEARCH.in_job = True
        _SEARCH.signalled()  # those landed in our handler, which held them (`signum`)
        if _SEARCH.signum is not None:
            _SEARCH.stop(_SEARCH.signum)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """After a trial's job, before the study records it: a signal its run took without
        stopping (the trial completed; the next search records it from its folder) ends the
        search, and so does a run that a `STOP` file stopped (it would be recorded as complete
        with the value of an unfinished run)."""
        from hydra.core.utils import JobStatus

        if not _SEARCH.active:
            return
        _SEARCH.in_job = False
        signum = _SEARCH.signum or _SEARCH.signalled()
        if signum is not None:
            _SEARCH.stop(signum)
        folder = Path(str(config.hydra.runtime.output_dir))
        if job_return.status == JobStatus.COMPLETED and _unfinished(folder):
            _SEARCH.stop(None)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The search is over: a stop held meanwhile exits; the study's lock is given back."""
        if _SEARCH.active and _SEARCH.signum is not None:
            _SEARCH.stop(_SEARCH.signum)
        _SEARCH.end()


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
    `<run_dir>/seed_<s>/`; returns the mean of their final eval means (what a sweeper sees).

    A stop ends the trial at the seed it reached: a signal exits with 128 + its number (as the
    CLI does), also one that came while a seed's final checkpoints were written and other
    seeds are left; a `STOP` file (or a callback) leaves a `seeds.json` naming the stopped
    seed and returns NaN. `seeds.json` is written whole or not at all."""
    from rltrain.runner.runner import Runner

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
                                     "stopped": {str(seed): str(result["stopped"])}})
            return float("nan")
        means.append(float(result["mean_reward"]))
        late = getattr(signal.Signals, str(runner.state.stop_reason), None)
        if runner.state.stop and late is not None and seed != seeds[-1]:
            _stop_between_seeds(int(late), seed)
    mean = sum(means) / len(means)
    _write_summary(run_dir, {"seeds": seeds, "mean_rewards": means, "mean_reward": mean})
    log.info("trial mean over %d seeds: %.2f (%s)", len(means), mean,
             ", ".join(f"{m:.2f}" for m in means))
    return mean


def _stop_between_seeds(signum: int, seed: int) -> NoReturn:
    """A signal came while seed `seed` wrote its final checkpoints: it completed, the trial's
    later seeds are not started."""
    if _SEARCH.active:
        _SEARCH.stop(signum)
    log.warning("stopped (%s) after seed %d completed; the trial's later seeds were not trained",
                signal.Signals(signum).name, seed)
    raise SystemExit(128 + signum)


def _write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """`seeds.json`, through a temporary file (a stop never leaves half of it)."""
    path = RunDir(run_dir).seeds_summary
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, path)


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
