"""`rltrain [overrides]`: the training command. Its overrides are checked, its run folder
claimed and locked before Hydra starts; Hydra then composes the job (or each job of a sweep),
which runs through `rltrain/launch.py` as `rltrain.train()` does. Under torchrun, every rank
runs the same command (`parallel/torchrun.py`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rltrain.cli.exit import EXIT_TRAINING, EXIT_USAGE, debug, fail
from rltrain.errors import TrainingError, UserError
from rltrain.parallel.world import SOLO, Solo, World, world_from_env

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from rltrain.config.compose import Composed

log = logging.getLogger("rltrain")


def train_command(argv: list[str]) -> None:
    """Validate the overrides, then hand over to Hydra (which also serves --help, --cfg, -m)."""
    # start-up: Hydra and yaml only for a training command line (not for `rltrain list`)
    from rltrain.config.compose import (
        check_sweep,
        compose_job,
        normalize_overrides,
        register_options,
    )
    from rltrain.run_folder.argv import HYDRA_FLAGS, arg_value, budget, is_multirun, with_overrides
    from rltrain.run_folder.claim import check_writable, claim_run_dir, with_run_dir
    from rltrain.run_folder.find import resume_run_dir, with_saved_choices
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
        # start-up: Hydra's help only for --help
        from rltrain.cli.help import app_help

        text = app_help(argv)  # --help without Hydra's slow group listing
        if text is not None:
            print(text)
            return
    # resume=<run>: its overrides checked against the saved config, which they are applied to
    # (as a new run's, they were checked against the default env's preset)
    extra = resume_run_dir(argv)
    composed = None
    if not extra and not flags:
        composed = compose_job(argv, normalized=True)  # once, here; handed to the Hydra job
        if is_multirun(argv):
            check_sweep(argv, composed)  # the other values of its sweeps, before any job runs
    check_writable([*argv, *extra])
    target, created = claim_run_dir([*argv, *extra])
    if target is None:  # a multirun, --help, --cfg ...: each job's Runner guards its own folder
        _train_task(with_overrides(argv, extra), SOLO, composed)
        return
    argv = with_run_dir(with_overrides(argv, extra), target)
    _train_in(argv, SOLO, target, created, arg_value(argv, "resume"), budget(argv), composed)


def _train_in(argv: list[str], collective: Solo, target: Path, created: list[Path],
              resume: str | None, total_timesteps: float | None,
              composed: Composed | None) -> None:
    """The training task of `argv` into `target`, locked before Hydra writes `.hydra/` there
    and checked (`check_target`). A run that fails before its first step leaves none of
    `created` (the folders this command made): only Hydra's record and the log of a failure
    already on the console would be in them."""
    # start-up: `rltrain list` imports this module; it needs no run folder helpers
    from rltrain.run_folder.lock import check_target, clear_failed_start, remove_empty, run_lock

    cleared = False
    try:
        with run_lock(target):
            check_target(target, resume, total_timesteps)
            try:
                _train_task(argv, collective, composed)
            except BaseException:
                cleared = bool(created) and clear_failed_start(target)
                raise
    finally:
        if cleared:
            remove_empty(created)


def _train_ranks(argv: list[str], world: World) -> None:
    """One rank of a torchrun job (see `rltrain/parallel/torchrun.py`): rank 0 guards the run folder,
    and removes the folders it created when the job fails before its first step."""
    # start-up: torch and torch.distributed only under torchrun (`rltrain list` imports this module)
    from rltrain import launch
    from rltrain.run_folder.argv import arg_value, budget

    hydra_args, collective, target, created, composed = launch.ranks(world, argv)
    try:
        if target is None:
            _train_task(hydra_args, collective, composed)
        else:
            _train_in(hydra_args, collective, target, created, arg_value(hydra_args, "resume"),
                      budget(argv), composed)
    except BaseException:  # this rank failed (fail() exits too): leave without waiting
        collective.abort()
        raise
    collective.close()


def _train_task(argv: list[str], collective: Solo, composed: Composed | None = None) -> None:
    """Hand `argv` to Hydra (imported here: `rltrain list` and the error paths before it never
    pay for it), which calls `_job` once per job with the ranks of this process's torchrun job
    (`SOLO` outside torchrun) and the configuration checked before Hydra started (`composed`,
    which a job composing the same configuration takes instead of validating it again)."""
    from rltrain.cli import hydra_run

    def job(cfg: DictConfig) -> float:
        return _job(cfg, collective, composed)

    with _argv(argv):
        if hydra_run.is_single_run(argv):  # the mode is known: Hydra's run without its probe
            hydra_run.run_single(argv, job)
            return
        # start-up: Hydra only once a command line is checked (`rltrain list` and refusals never pay for it)
        import hydra

        app = hydra.main(version_base=hydra_run.VERSION_BASE, config_path=hydra_run.CONFIG_PATH,
                         config_name=hydra_run.CONFIG_NAME)
        app(job)()


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    """`sys.argv` as Hydra reads it (`hydra.main` takes no argument list) while it runs, and
    the caller's again after: an in-process caller (`rltrain.cli.main([...])`, a test) keeps
    its own."""
    saved = sys.argv
    sys.argv = [saved[0] if saved else "rltrain", *argv]
    try:
        yield
    finally:
        sys.argv = saved


def _job(cfg: DictConfig, collective: Solo, composed: Composed | None) -> float:
    """One training job (a multirun calls it once per job); returns the final eval mean."""
    try:
        return _run_job(cfg, collective, composed)
    except (UserError, TrainingError) as exc:
        if debug():
            raise
        fail(str(exc), EXIT_USAGE if isinstance(exc, UserError) else EXIT_TRAINING)
        raise  # unreachable: fail() exits


def _run_job(cfg: DictConfig, collective: Solo, composed: Composed | None) -> float:
    """The job Hydra composed, run by `launch.run` as `rltrain.train()` runs one; exit 128 +
    signal when a signal stopped it (what schedulers read; inside a search, with the line that
    continues the search)."""
    # start-up: Hydra, torch and everything a run builds only once a job runs
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    # torch, and everything a run builds: imported once a job runs, not by `rltrain list`,
    # `--help` or a refused command line
    from rltrain import launch
    from rltrain.config.compose import train_config_of
    from rltrain.sweep.search import preempted, search_continues
    from rltrain.sweep.trial import fit_threads

    hydra = HydraConfig.get()
    job = launch.Job(
        Path(hydra.runtime.output_dir), lambda: train_config_of(cfg, composed), list(hydra.overrides.task),
        lambda: OmegaConf.to_container(cfg, resolve=True),  # type: ignore[arg-type,return-value]
        tune=fit_threads, collective=collective)
    with search_continues():  # a trial's full disk: the line continues the search
        outcome = launch.run(job, str(cfg.resume) if cfg.get("resume") else None)
    if outcome.signum is not None:  # preempted: tell schedulers
        preempted(outcome.signum)
    return outcome.value
