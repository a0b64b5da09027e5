"""The Optuna study of a `+hpo=` search: `ResumeStudy`, the Hydra callback of the `+hpo=`
presets, continues an interrupted search's study.

A trial still marked running in a study nobody holds (`search.py`: one live search per study)
was left by a search that stopped: it is recorded from its folder when its runs completed, else
marked failed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf, read_write

from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import UserError
from rltrain.run_folder.lock import check_not_live
from rltrain.sweep.search import SEARCH

log = logging.getLogger("rltrain")

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
    # optional extra: optuna, for +hpo= searches only (`pip install "rltrain[sweep]"`)
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
    # optional extra: optuna and SQLAlchemy, for +hpo= searches only (`pip install "rltrain[sweep]"`)
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
    # optional extra: optuna, for +hpo= searches only (`pip install "rltrain[sweep]"`)
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
    for run in (folder, *sorted(folder.glob("seed_*"))):
        try:
            check_not_live(run)
        except UserError:
            return True
    return False


def trial_value(folder: Path) -> float | None:
    """What a trial's job returned, read back from its folder: the `score` in `seeds.json` (its
    `score_of` says which: a batch's IQM, the mean of seeds trained in turn), or
    the final eval mean in `final.pt` (the mean over the seeds' with `seeds_per_trial=K`).
    None when the trial did not complete (cut short, or stopped); NaN when it completed but
    its value cannot be read."""
    paths = RunDir(folder)
    summary = _read_json(paths.seeds_summary)
    if summary is not None:
        if summary.get("stopped"):
            return None
        value = summary.get("score", summary.get("mean_reward"))  # older folders: no score
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
    # start-up: torch only to read a trial's final.pt (a refused search imports none)
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
        SEARCH.start(_continue_command(config))
        trials_dir = None
        if folder is not None:
            trials_dir = Path(str(OmegaConf.select(config, "hydra.sweep.dir") or folder))
        try:
            if folder is not None:
                SEARCH.lock(folder, name)
            existing, done = settle_trials(storage, name, trials_dir, sweeper.get("direction"))
        except UserError as exc:
            SEARCH.end()
            _refuse(str(exc))
        if SEARCH.signum is not None:
            SEARCH.stop(SEARCH.signum)
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
        if not SEARCH.active:  # a launcher's worker process
            return
        SEARCH.in_job = True
        SEARCH.signalled()  # those landed in our handler, which held them (`signum`)
        if SEARCH.signum is not None:
            SEARCH.stop(SEARCH.signum)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """After a trial's job, before the study records it: a signal its run took without
        stopping (the trial completed; the next search records it from its folder) ends the
        search, and so does a run that a `STOP` file stopped (it would be recorded as complete
        with the value of an unfinished run)."""
        if not SEARCH.active:
            return
        SEARCH.in_job = False
        signum = SEARCH.signum or SEARCH.signalled()
        if signum is not None:
            SEARCH.stop(signum)
        folder = Path(str(config.hydra.runtime.output_dir))
        if job_return.status == JobStatus.COMPLETED and _unfinished(folder):
            SEARCH.stop(None)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The search is over: a stop held meanwhile exits; the study's lock is given back."""
        if SEARCH.active and SEARCH.signum is not None:
            SEARCH.stop(SEARCH.signum)
        SEARCH.end()


def trial_folder(cfg: DictConfig, trial: Any) -> None:
    """Optuna sweeper hook (`custom_search_space`): run each trial in `<sweep>/<trial number>/`.

    Hydra numbers the jobs of every invocation from 0; the trial number keeps counting across a
    resumed study, so a second invocation never writes into an earlier trial's folder.
    """
    trial.suggest_int("hydra.sweep.subdir", trial.number, trial.number)
