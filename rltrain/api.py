"""Python entry point: `rltrain.train(overrides)` composes the config exactly as the CLI does
(`rltrain.config.compose.compose_train_config`)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Any

from rltrain.config.schema import TrainConfig

log = logging.getLogger("rltrain")
_BUSY = threading.RLock()
"""Held by the thread in `train` (another thread's call is refused: Hydra's state is global)."""


def train(overrides: list[str] | TrainConfig | None = None, run_dir: str | Path | None = None,
          algo: Any = None, callbacks: dict[str, list] | None = None) -> dict[str, Any]:
    """Train from Hydra-style overrides (`["algo=ppo", "env=CartPole-v1", "net.hidden=[32]"]`)
    or a `TrainConfig`, checked as the command line checks them (a `TrainConfig` is validated
    on a copy; yours is left as it is).

    Returns the final evaluation result (`mean_reward`, `std_reward`, ...); with
    `seeds_per_trial=K`, the trial's summary (`mean_reward` over the seeds). `algo=` trains an
    algorithm built in Python instead of the one the config would build. `resume=<run>`
    continues a run as `rltrain resume=` does (into `run_dir`, default the run's own folder).
    What only the command line does is refused in one line, not ignored: sweeps (`seed=0,1,2`),
    searches and `hydra.*` options (give `run_dir=`).
    It leaves the caller's process as it found it (`rltrain/guest.py`): random streams, torch's
    threads, default dtype and grad mode, logging, and a Hydra of the caller's own.
    """
    from rltrain.cli.run_target import with_saved_choices
    from rltrain.errors import UserError
    from rltrain.guest import guest

    if isinstance(overrides, str):  # train("algo=ppo env=CartPole-v1")
        raise UserError(f"train() takes a list of overrides, not one string: "
                        f"train({overrides.split()!r})")
    # resume=<run>: its algo= option first, so its algo.* overrides are checked against that
    # algorithm's fields, as on the command line (they were "unknown" against PPO's)
    given = (None if isinstance(overrides, TrainConfig)
             else with_saved_choices([str(o) for o in overrides or []]))
    cfg = _config(overrides if given is None else given)
    if not _BUSY.acquire(blocking=False):
        raise UserError("train() is already running in another thread of this process; rltrain "
                        "is not thread-safe (Hydra's global state, the process's random "
                        "streams): run parallel trainings as processes")
    try:
        with guest(console=True):
            try:
                result = _train(cfg, given, run_dir, algo, callbacks)
            except SystemExit as exc:  # a trial's seed stopped by a signal (run_seeds exits
                signum = exc.code - 128 if isinstance(exc.code, int) else 0  # as the CLI)
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    raise
                result = {"stopped": signal.Signals(signum).name}
    finally:
        _BUSY.release()
    _pass_on_signal(result)
    return result


def _pass_on_signal(result: dict[str, Any]) -> None:
    """A run stopped by Ctrl-C or SIGTERM saved its checkpoint and gave the caller's signal
    handlers back: the signal now goes on to the caller, as if rltrain had not caught it (Ctrl-C
    raises KeyboardInterrupt; a SIGTERM ends the process unless the caller handles it), where
    `train()` used to return as if nothing had happened and an application's loop went on."""
    stopped = result.get("stopped")
    names = set(stopped.values()) if isinstance(stopped, dict) else {stopped}
    for name in ("SIGINT", "SIGTERM"):
        if name in names:
            signal.raise_signal(signal.Signals[name])


def _train(cfg: TrainConfig, given: list[str] | None, run_dir: str | Path | None, algo: Any,
           callbacks: dict[str, list] | None) -> dict[str, Any]:
    """`train` of a validated config (`given`: its override list, None for a `TrainConfig`)."""
    from rltrain.checkpoint.run_dir import RunDir, require_writable
    from rltrain.loggers.run_log import log_to
    from rltrain.runner.ownership import remove_empty
    from rltrain.runner.runner import Runner
    from rltrain.runner.setup import default_run_dir

    if run_dir is not None:  # fixed now: a chdir of the caller's mid-run must not split the run
        run_dir = Path(run_dir).absolute()
    where = Path(run_dir) if run_dir is not None else None if cfg.resume else Path("outputs")
    if where is not None:  # a resume into its own folder: checked where the run is found
        require_writable(where, f"train writes the run into {where}")
    if cfg.resume and cfg.resume != "auto":
        return _resume(cfg, given or [], run_dir, algo, callbacks)
    if cfg.seeds_per_trial > 1:
        return _train_trial(cfg, run_dir, algo, callbacks, given)
    if cfg.num_seeds > 1:
        return _train_seeds(cfg, run_dir, algo, callbacks, given)
    folder = Path(run_dir) if run_dir is not None else default_run_dir()
    try:
        runner = Runner(cfg, folder, algo=algo, callbacks=callbacks)
    except BaseException:
        if run_dir is None:  # the folder claimed for it stays empty: not left behind
            remove_empty([folder])
        raise
    recorded = RunDir(folder).is_hydra_run()
    try:
        with log_to(RunDir(folder).train_log):  # as the command line's run folder has it
            return runner.run()
    finally:
        # the `.hydra/` record a command-line run has, so `rltrain report` groups its seeds as
        # one experiment; only for a run that started (a refused one writes nothing there)
        if not recorded and given is not None and runner.started:
            RunDir(folder).write_record(runner.config_dict, given)


def _config(overrides: list[str] | TrainConfig | None) -> TrainConfig:
    """The validated config of `train`'s argument; `UserError` for what it cannot do."""
    import copy

    from rltrain.algos.configs.base import AlgoConfig
    from rltrain.cli.run_target import is_multirun, resumed_config
    from rltrain.config.compose import compose_train_config
    from rltrain.config.overrides import first_of_sweeps
    from rltrain.config.validation import validate
    from rltrain.errors import UserError

    if isinstance(overrides, TrainConfig):
        if not isinstance(overrides.algo, AlgoConfig):
            raise UserError("train(TrainConfig(...)) needs algo=<an algorithm config>, e.g. "
                            "TrainConfig(algo=PPOConfig(), env=EnvConfig(id='CartPole-v1'))")
        _check_types(overrides)
        cfg = validate(copy.deepcopy(overrides))
    else:
        given = list(overrides or [])
        flags = [o for o in given if o.startswith("-")
                 or o.lstrip("+~").startswith(("hydra.", "hydra/"))]
        if flags:
            raise UserError(f"train(): {flags[0]} is a command-line option; the Python API runs "
                            f"one job into run_dir= (default: a new outputs/<date>/<time>)")
        if is_multirun(given):  # +hpo=<algo>: a search, many jobs
            raise UserError("train() runs one job: a search (+hpo=...) is for the command line")
        if first_of_sweeps(given) != given:
            raise UserError("train() runs one job: sweeps (seed=0,1,2) are for `rltrain -m`; "
                            "in Python, call train() once per value (or num_seeds=N for seeds)")
        # resume=<run>: checked against the saved config, as `rltrain resume=` does (as a new
        # run's, the overrides were checked against the default env's preset)
        cfg = resumed_config(given) or compose_train_config(given)
    if cfg.resume and isinstance(overrides, TrainConfig):
        raise UserError(f"train(TrainConfig(resume={cfg.resume!r})): a resume checks what its "
                        f"overrides change; give them as a list, [..., 'resume=<run>']")
    return cfg


def _check_types(cfg: TrainConfig) -> None:
    """The types the command line's schema checks, for a `TrainConfig` built in Python
    (`PPOConfig(lr="abc")` met a TypeError deep in validation): one line naming the field."""
    from omegaconf import OmegaConf

    from rltrain.config.overrides import explain
    from rltrain.errors import UserError

    try:
        OmegaConf.structured(cfg)
    except Exception as exc:  # noqa: BLE001  (OmegaConf's validation and type errors)
        raise UserError(f"train(TrainConfig(...)): {explain(exc)}") from exc


def _resume(cfg: TrainConfig, overrides: list[str], run_dir: str | Path | None, algo: Any,
            callbacks: dict[str, list] | None) -> dict[str, Any]:
    """`resume=<run or checkpoint>`, as `rltrain resume=` checks and continues it: the saved
    config with only the harmless overrides applied (the rest refused), code the run's env
    names named again in `overrides`, into `run_dir` (default: the checkpoint's own run)."""
    from rltrain.checkpoint import format as checkpoint
    from rltrain.checkpoint.run_dir import RunDir
    from rltrain.config.compose import composed_dict, normalize_overrides
    from rltrain.loggers.run_log import log_to
    from rltrain.runner.resume import resume_config
    from rltrain.runner.runner import Runner
    from rltrain.seeds.folder import batch_seeds

    if batch_seeds(cfg.resume):
        return _resume_batch(Path(cfg.resume), overrides, run_dir, algo, callbacks)
    ckpt = checkpoint.resolve(cfg.resume)
    payload = checkpoint.load(ckpt)
    normalized = normalize_overrides(overrides)
    resumed = resume_config(payload["config"], composed_dict(normalized), normalized, str(ckpt))
    own = RunDir.of_checkpoint(ckpt).root.absolute()  # fixed now, as in `_train`
    folder = Path(run_dir) if run_dir is not None else own
    runner = Runner(resumed, folder, algo=algo, callbacks=callbacks, resume_from=payload)
    paths = RunDir(folder)
    in_place = folder.resolve() == own.resolve()
    with log_to(paths.train_log):  # the run's log goes on, as a command-line resume's does
        log.info("resuming %s from %s", folder, ckpt)
        try:
            return runner.run()
        finally:  # the resume's record (`report` merges it), as `rltrain resume=` writes it
            if runner.started and (in_place or not paths.is_hydra_run()):
                paths.write_record(runner.config_dict, overrides, resume=in_place)


def _resume_batch(folder: Path, overrides: list[str], run_dir: str | Path | None, algo: Any,
                  callbacks: dict[str, list] | None) -> dict[str, Any]:
    """`resume=<batch folder>`, as `rltrain resume=` continues it (`SeedRunner.resumed`): every
    seed from where it is, the overrides checked against each seed's saved config; returns the
    batch summary."""
    from rltrain.checkpoint.run_dir import RunDir
    from rltrain.config.compose import composed_dict, normalize_overrides
    from rltrain.errors import UserError
    from rltrain.loggers.run_log import log_to
    from rltrain.runner.resume import resume_config
    from rltrain.seeds.folder import batch_overrides
    from rltrain.seeds.runner import SeedRunner

    if algo is not None or callbacks:
        raise UserError("a batch of seeds builds one algorithm per seed itself: train(algo=...) "
                        "and callbacks= need a single run")
    given = batch_overrides(folder, [o for o in normalize_overrides(overrides)
                                     if o.lstrip("+~").split("=", 1)[0] != "resume"])
    composed = composed_dict(given)
    target = Path(run_dir) if run_dir is not None else folder.absolute()
    with log_to(RunDir(target).train_log):  # the batch's log goes on, as the command line's
        return SeedRunner.resumed(
            folder, target, lambda saved: resume_config(saved, composed, given, str(folder))).run()


def _train_trial(cfg: TrainConfig, run_dir: str | Path | None, algo: Any,
                 callbacks: dict[str, list] | None, overrides: list[str] | None) -> dict[str, Any]:
    """`seeds_per_trial=K`: each seed in turn in `<run_dir>/seed_<s>/`, as the command line
    trains a trial; returns the trial's summary (seeds, their final means, their mean)."""
    import json

    from rltrain.checkpoint.run_dir import RunDir
    from rltrain.config.schema import config_to_dict
    from rltrain.errors import UserError
    from rltrain.runner.setup import default_run_dir
    from rltrain.sweep.trial import run_seeds

    if algo is not None or callbacks:
        raise UserError("seeds_per_trial > 1 builds one algorithm per seed itself: train(algo=...) "
                        "and callbacks= need seeds_per_trial=1")
    folder = Path(run_dir) if run_dir is not None else default_run_dir()
    if overrides is not None and not RunDir(folder).is_hydra_run():  # as the command line's
        RunDir(folder).write_record(config_to_dict(cfg), overrides)  # trial folder: each seed copies it
    run_seeds(cfg, folder)
    return json.loads(RunDir(folder).seeds_summary.read_text())


def _train_seeds(cfg: TrainConfig, run_dir: str | Path | None, algo: Any,
                 callbacks: dict[str, list] | None, overrides: list[str] | None) -> dict[str, Any]:
    """`num_seeds > 1`: the batch summary (`mean_reward` is the IQM of the seeds' final evals)."""
    from rltrain.errors import UserError
    from rltrain.runner.setup import default_run_dir
    from rltrain.seeds.runner import SeedRunner

    if algo is not None or callbacks:
        raise UserError("num_seeds > 1 builds one algorithm per seed itself: train(algo=...) and "
                        "callbacks= need num_seeds=1")
    from rltrain.checkpoint.run_dir import RunDir
    from rltrain.loggers.run_log import log_to

    folder = Path(run_dir) if run_dir is not None else default_run_dir()
    runner = SeedRunner(cfg, folder)
    runner.overrides = overrides or []
    with log_to(RunDir(folder).train_log):  # the batch's log, as the command line's folder has
        return runner.run()
