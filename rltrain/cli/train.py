"""`rltrain [overrides]`: the training command. Its overrides are checked, its run folder
claimed and locked before Hydra starts; Hydra then composes the job (or each job of a sweep),
which runs through `rltrain/launch.py` as `rltrain.train()` does. Under torchrun, every rank
runs the same command (`parallel/torchrun.py`).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.cli.exit import EXIT_TRAINING, EXIT_USAGE, debug, fail
from rltrain.errors import TrainingError, UserError
from rltrain.parallel.world import SOLO, Solo, World, world_from_env

if TYPE_CHECKING:
    from omegaconf import DictConfig

log = logging.getLogger("rltrain")


def train_command(argv: list[str]) -> None:
    """Validate the overrides, then hand over to Hydra (which also serves --help, --cfg, -m)."""
    from rltrain.cli.run_target import (
        HYDRA_FLAGS,
        arg_value,
        budget,
        check_writable,
        claim_run_dir,
        is_multirun,
        resume_run_dir,
        with_overrides,
        with_run_dir,
        with_saved_choices,
    )
    from rltrain.config.compose import (
        check_sweep,
        compose_train_config,
        normalize_overrides,
        register_options,
    )
    from rltrain.sweep.plugins import check_plugins

    argv = with_saved_choices(normalize_overrides(argv))  # resume=: the run's algo=, env=, ...
    world = world_from_env()
    if world is not None and world.size > 1 and not any(
            a.split("=")[0] in HYDRA_FLAGS for a in argv):
        _train_ranks(argv, world)
        return
    check_plugins(argv)  # a missing sweeper/launcher plugin: one line naming the extra
    register_options(argv)
    flags = any(a.split("=")[0] in HYDRA_FLAGS for a in argv)
    if flags:  # --help, --cfg ...: Hydra composes, nothing runs
        from rltrain.cli.help import app_help

        text = app_help(argv)  # --help without Hydra's slow group listing
        if text is not None:
            print(text)
            return
    # resume=<run>: its overrides checked against the saved config, which they are applied to
    # (as a new run's, they were checked against the default env's preset)
    extra = resume_run_dir(argv)
    if not extra and not flags:
        compose_train_config(argv, normalized=True)  # once, here; the Hydra job reuses it
        if is_multirun(argv):
            check_sweep(argv)  # the other values of its sweeps, before the first job runs
    check_writable([*argv, *extra])
    target, created = claim_run_dir([*argv, *extra])
    if target is None:  # a multirun, --help, --cfg ...: each job's Runner guards its own folder
        sys.argv = [sys.argv[0], *with_overrides(argv, extra)]
        _train_task()
        return
    argv = with_run_dir(with_overrides(argv, extra), target)
    sys.argv = [sys.argv[0], *argv]
    _train_in(target, created, arg_value(argv, "resume"), budget(argv))


def _train_in(target: Path, created: list[Path], resume: str | None,
              total_timesteps: float | None) -> None:
    """The training task (`sys.argv`) into `target`, locked before Hydra writes `.hydra/`
    there and checked (`check_target`). A run that fails before its first step leaves none of
    `created` (the folders this command made): only Hydra's record and the log of a failure
    already on the console would be in them."""
    from rltrain.runner.ownership import check_target, clear_failed_start, remove_empty, run_lock

    cleared = False
    try:
        with run_lock(target):
            check_target(target, resume, total_timesteps)
            try:
                _train_task()
            except BaseException:
                cleared = bool(created) and clear_failed_start(target)
                raise
    finally:
        if cleared:
            remove_empty(created)


def _train_ranks(argv: list[str], world: World) -> None:
    """One rank of a torchrun job (see `rltrain/parallel/torchrun.py`): rank 0 guards the run folder,
    and removes the folders it created when the job fails before its first step."""
    global _COLLECTIVE
    from rltrain.cli.run_target import arg_value, budget
    from rltrain.parallel.torchrun import prepare

    hydra_args, _COLLECTIVE, target, created = prepare(argv, world)
    sys.argv = [sys.argv[0], *hydra_args]
    try:
        if target is None:
            _train_task()
        else:
            _train_in(target, created, arg_value(hydra_args, "resume"), budget(argv))
    except BaseException:  # this rank failed (fail() exits too): leave without waiting
        _COLLECTIVE.abort()
        raise
    _COLLECTIVE.close()


_COLLECTIVE: Solo = SOLO
"""The ranks of a torchrun job this process belongs to (`SOLO` outside torchrun)."""


def _train_task() -> None:
    """Hand `sys.argv` to Hydra (imported here: `rltrain list` and the error paths before it
    never pay for it), which calls `_job` once per job."""
    import hydra

    hydra.main(version_base="1.3", config_path="pkg://rltrain.conf", config_name="config")(_job)()


def _job(cfg: DictConfig) -> float:
    """One training job (a multirun calls it once per job); returns the final eval mean."""
    try:
        return _run_job(cfg)
    except (UserError, TrainingError) as exc:
        if debug():
            raise
        fail(str(exc), EXIT_USAGE if isinstance(exc, UserError) else EXIT_TRAINING)
        raise  # unreachable: fail() exits


def _run_job(cfg: DictConfig) -> float:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from rltrain.checkpoint import format as checkpoint
    from rltrain.config.compose import train_config_of
    from rltrain.runner.resume import find_resume_checkpoint, resume_config
    from rltrain.runner.runner import Runner
    from rltrain.seeds.folder import batch_seeds
    from rltrain.sweep.search import in_search, preempted
    from rltrain.sweep.trial import fit_threads, run_seeds

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    payload = None
    if cfg.get("resume") and batch_seeds(run_dir if cfg.resume == "auto" else cfg.resume) and (
            cfg.resume != "auto" or RunDir(run_dir).can_resume()):  # (auto: else a new batch)
        return _resume_seed_batch(cfg, run_dir)
    ckpt = find_resume_checkpoint(str(cfg.resume), run_dir) if cfg.get("resume") else None
    if ckpt is not None:
        payload = checkpoint.load(ckpt)
        composed = OmegaConf.to_container(cfg, resolve=True)
        train_cfg = resume_config(payload["config"], composed, list(HydraConfig.get().overrides.task),
                                  str(ckpt))
        log.info("resuming %s from %s", run_dir, ckpt)
    else:
        train_cfg = train_config_of(cfg)  # checked before Hydra started (unless a sweep's job)
    train_cfg = fit_threads(train_cfg)
    if train_cfg.seeds_per_trial > 1 and payload is None:
        return run_seeds(train_cfg, run_dir)
    if train_cfg.num_seeds > 1:
        return _run_seed_batch(train_cfg, run_dir, payload)
    runner = Runner(train_cfg, run_dir, resume_from=payload, collective=_COLLECTIVE)
    runner.stop_line = not in_search()  # a search's trial: the search says how to continue
    result = runner.run()
    if "stopped" in result and runner.stopper.signum is not None:  # preempted: tell schedulers
        preempted(runner.stopper.signum)
    return float(result["mean_reward"])


def _run_seed_batch(cfg: Any, run_dir: Path, payload: dict | None) -> float:
    """`num_seeds=N`: the seeds as one batch (`rltrain/seeds/`); returns their final eval IQM."""
    from rltrain.seeds.runner import SeedRunner
    from rltrain.sweep.trial import write_seed_record

    if payload is not None:  # resume= names one seed's checkpoint of a batch
        raise UserError("resume= of one checkpoint continues one seed: add num_seeds=1, or "
                        "resume the whole batch with resume=<batch folder>")
    _check_no_ranks()
    runner = SeedRunner(cfg, run_dir)
    for seed in runner.seeds:
        write_seed_record(run_dir, RunDir(run_dir).seed(seed).root, seed)
    return _finish_seed_batch(runner)


def _resume_seed_batch(cfg: DictConfig, run_dir: Path) -> float:
    """`resume=<batch folder>`: every seed from where it is, as one batch again."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from rltrain.runner.resume import resume_config
    from rltrain.seeds.folder import batch_overrides
    from rltrain.seeds.runner import SeedRunner

    _check_no_ranks()
    folder = run_dir if cfg.resume == "auto" else Path(str(cfg.resume))
    composed = OmegaConf.to_container(cfg, resolve=True)
    overrides = batch_overrides(folder, [o for o in HydraConfig.get().overrides.task
                                         if o.lstrip("+~").split("=", 1)[0] != "resume"])
    return _finish_seed_batch(SeedRunner.resumed(
        folder, run_dir, lambda saved: resume_config(saved, composed, overrides, str(folder))))


def _check_no_ranks() -> None:
    if _COLLECTIVE.world.size > 1:
        raise UserError("num_seeds > 1 under torchrun: pick one (a batch of seeds runs in one "
                        "process; torchrun splits one seed's rollouts over processes)")


def _finish_seed_batch(runner: Any) -> float:
    """Run the batch; exit 128 + signal when a signal stopped it (schedulers read that)."""
    from rltrain.sweep.search import in_search, preempted

    runner.stop_line = not in_search()  # a search's trial: the search says how to continue
    summary = runner.run()
    if runner.signum is not None:  # preempted: tell schedulers
        preempted(runner.signum)
    return float(summary["mean_reward"])
