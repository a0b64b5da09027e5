"""One function per way a training job starts, called by the command line and `rltrain.train()`.

The command line (`cli/train.py`) checks its overrides and claims the run folder before Hydra
starts, and Hydra composes each job; `rltrain.train()` (`api.py`) composes its config with the
same checks and picks its folder. Both then hand the job to `run`, which tells the mode from the
config and calls that mode's function:

    new_run       one run (each rank's run too, under torchrun: `Job.collective`)
    resume_run    a run continued from a checkpoint (`resume=<run or ckpt>`, `resume=auto`)
    seed_batch    `num_seeds=N`: the seeds trained together as one batch (`rltrain/seed_batch/`)
    resume_batch  `resume=<batch folder>`: every seed of a batch from where it is
    trial         `seeds_per_trial=K`: the seeds in turn, one folder each (a sweeper's trial)
    ranks         `torchrun ... -m rltrain`: this process's rank of a data-parallel job

So what one entry point accepts the other accepts, and what a mode cannot do is refused with the
same line from both. What only one of them has stays with it: Hydra, the folder claimed before
it, sweeps and exit codes in `cli/`; the caller's process state, returned dicts and re-raised
signals in `api.py`. Without Hydra around it (`Job.hydra` false), a job writes the `.hydra/`
record and the `train.log` that Hydra writes for the command line.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.compose import Composed, normalize_overrides
from rltrain.config.schema import TrainConfig, config_to_dict
from rltrain.errors import UserError
from rltrain.loggers.run_log import log_to
from rltrain.parallel.torchrun import prepare
from rltrain.parallel.world import SOLO, Solo, World
from rltrain.run_folder.batch import batch_overrides, batch_seeds
from rltrain.run_folder.resume_checkpoint import find_resume_checkpoint
from rltrain.run_folder.resume_rules import resume_config
from rltrain.runner.runner import Runner
from rltrain.seed_batch.runner import SeedRunner
from rltrain.sweep.search import in_search
from rltrain.sweep.trial import run_seeds, write_seed_record

log = logging.getLogger("rltrain")


def _as_is(cfg: TrainConfig) -> TrainConfig:
    return cfg


@dataclass
class Job:
    """One training job, as its entry point hands it over."""

    run_dir: Path
    """The job's folder, absolute: Hydra's job folder, or the one `train()` was given or chose."""
    config: Callable[[], TrainConfig]
    """The validated config of a job that starts afresh (not asked for by a resume)."""
    overrides: list[str] | None
    """The overrides the job was given, as given: what a resume checks against the saved config
    and a record repeats; None for a `TrainConfig` given to `train()`."""
    composed: Callable[[], dict[str, Any]]
    """The plain dict of the config composed from `overrides` (what a resume compares)."""
    hydra: bool = True
    """Hydra runs the job and writes its `.hydra/` record and `train.log` (the command line)."""
    tune: Callable[[TrainConfig], TrainConfig] = _as_is
    """A last change to a validated config before it trains (the command line's sweeps: a fair
    share of the cores, `sweep.trial.fit_threads`)."""
    algo: Any = None
    """An algorithm built in Python, trained instead of the one the config builds (`train()`)."""
    callbacks: dict[str, list] | None = None
    """`{event: [fn, ...]}` for the run (`train()`)."""
    collective: Solo = field(default=SOLO)
    """The ranks of a torchrun job this process belongs to (`SOLO` outside torchrun)."""


@dataclass
class Outcome:
    """What a job ended with."""

    result: dict[str, Any]
    """The final evaluation (a run) or the summary (a batch of seeds, a trial)."""
    signum: int | None
    """The signal that stopped the job (the command line exits with 128 + it), else None."""

    @property
    def value(self) -> float:
        """What a sweeper optimises: the final eval mean (the seeds' mean, or IQM for a batch);
        NaN when there is none (a trial stopped by its `STOP` file)."""
        mean = self.result.get("mean_reward")
        return float("nan") if mean is None else float(mean)


def run(job: Job, resume: str | None) -> Outcome:
    """The job in the mode its `resume=` and config ask for (see the module's docstring)."""
    folder = batch_to_resume(resume, job.run_dir)
    if folder is not None:
        return resume_batch(folder, job)
    ckpt = find_resume_checkpoint(resume, job.run_dir) if resume else None
    if ckpt is not None:  # (resume=auto without a checkpoint: the run starts afresh)
        return resume_run(ckpt, job)
    cfg = job.tune(job.config())
    if cfg.seeds_per_trial > 1:
        return trial(cfg, job)
    if cfg.num_seeds > 1:
        return seed_batch(cfg, job)
    return new_run(cfg, job)


def batch_to_resume(resume: str | None, run_dir: Path) -> Path | None:
    """The folder of the seed batch `resume=` continues: `resume=<batch folder>`, or with
    `resume=auto` the job's own folder when it holds a batch to resume; else None."""
    if not resume:
        return None
    folder = run_dir if resume == "auto" else Path(resume)
    if not batch_seeds(folder) or (resume == "auto" and not RunDir(run_dir).can_resume()):
        return None
    return folder


def resumed_folder(resume: str) -> Path:
    """The folder of the run or batch `resume=<run, batch or checkpoint>` names (absolute): where
    a resume writes unless told otherwise."""
    if batch_seeds(resume):
        return Path(resume).absolute()
    return RunDir.of_checkpoint(checkpoint.resolve(resume)).root.absolute()


def new_run(cfg: TrainConfig, job: Job) -> Outcome:
    """One run of `cfg` into the job's folder."""
    # a search's trial: the search says how to continue (`stop_line`)
    runner = Runner(cfg, job.run_dir, algo=job.algo, callbacks=job.callbacks,
                    collective=job.collective, stop_line=not in_search())
    paths = RunDir(job.run_dir)
    recorded = paths.is_hydra_run()
    try:
        with _run_log(job):
            result = runner.run()
    finally:
        # the `.hydra/` record a command-line run has, so `rltrain report` groups its seeds as
        # one experiment; only for a run that started (a refused one writes nothing there)
        if not job.hydra and not recorded and job.overrides is not None and runner.started:
            paths.write_record(runner.config_dict, job.overrides)
    return Outcome(result, runner.stopper.signum if "stopped" in result else None)


def resume_run(ckpt: Path, job: Job) -> Outcome:
    """The run of checkpoint `ckpt` continued into the job's folder: the saved config with only
    the harmless overrides applied (the rest refused), code the run's env names named again."""
    payload = checkpoint.load(ckpt)
    overrides = normalize_overrides(job.overrides or [])
    cfg = job.tune(resume_config(payload["config"], job.composed(), overrides, str(ckpt)))
    if cfg.num_seeds > 1:  # resume= names one seed's checkpoint of a batch
        raise UserError("resume= of one checkpoint continues one seed: add num_seeds=1, or "
                        "resume the whole batch with resume=<batch folder>")
    in_place = job.run_dir.resolve() == RunDir.of_checkpoint(ckpt).root.resolve()
    runner = Runner(cfg, job.run_dir, algo=job.algo, callbacks=job.callbacks,
                    resume_from=payload, collective=job.collective, stop_line=not in_search())
    paths = RunDir(job.run_dir)
    with _run_log(job):  # the run's log goes on
        log.info("resuming %s from %s", job.run_dir, ckpt)
        try:
            result = runner.run()
        finally:  # the resume's record (`report` merges it), as Hydra writes it for a command
            if not job.hydra and runner.started and (in_place or not paths.is_hydra_run()):
                paths.write_record(runner.config_dict, job.overrides or [], resume=in_place)
    return Outcome(result, runner.stopper.signum if "stopped" in result else None)


def seed_batch(cfg: TrainConfig, job: Job) -> Outcome:
    """`num_seeds=N`: the seeds as one batch (`rltrain/seed_batch/`); its summary's `mean_reward` is
    the IQM of the seeds' final evals."""
    _one_algorithm_per_seed(job, "num_seeds > 1 builds one algorithm per seed itself: "
                                 "train(algo=...) and callbacks= need num_seeds=1")
    _no_ranks(job)
    # the overrides: without Hydra's record, each seed's record repeats them
    runner = SeedRunner(cfg, job.run_dir, overrides=job.overrides, stop_line=not in_search())
    for seed in runner.seeds:  # Hydra's record of the batch, copied into each seed's folder
        write_seed_record(job.run_dir, RunDir(job.run_dir).seed(seed).root, seed)
    return _finish_batch(runner, job)


def resume_batch(folder: Path, job: Job) -> Outcome:
    """`resume=<batch folder>`: every seed from where it is, as one batch again, the overrides
    checked against each seed's saved config (`num_seeds=` and `seed=` restating the batch's own
    values accepted)."""
    _one_algorithm_per_seed(job, "a batch of seeds builds one algorithm per seed itself: "
                                 "train(algo=...) and callbacks= need a single run")
    _no_ranks(job)
    given = batch_overrides(folder, [o for o in normalize_overrides(job.overrides or [])
                                     if o.lstrip("+~").split("=", 1)[0] != "resume"])
    composed = job.composed()
    runner = SeedRunner.resumed(
        folder, job.run_dir, lambda saved: resume_config(saved, composed, given, str(folder)),
        stop_line=not in_search())
    paths, in_place = RunDir(job.run_dir), job.run_dir.resolve() == folder.resolve()
    try:
        return _finish_batch(runner, job)
    finally:  # the resume's record beside the batch's, as Hydra writes it for a command
        if not job.hydra and any(r.started for r in runner.runners) \
                and (in_place or not paths.is_hydra_run()):
            paths.write_record(config_to_dict(runner.cfg), job.overrides or [], resume=in_place)


def trial(cfg: TrainConfig, job: Job) -> Outcome:
    """`seeds_per_trial=K`: each seed in turn in `<run>/seed_<s>/`; the summary (`seeds.json`)
    holds the seeds, their final means and their mean. A signal exits (`sweep.trial.run_seeds`)."""
    _one_algorithm_per_seed(job, "seeds_per_trial > 1 builds one algorithm per seed itself: "
                                 "train(algo=...) and callbacks= need seeds_per_trial=1")
    paths = RunDir(job.run_dir)
    if not job.hydra and job.overrides is not None and not paths.is_hydra_run():
        paths.write_record(config_to_dict(cfg), job.overrides)  # each seed's record copies it
    with _run_log(job):  # the trial's own log, beside each seed's
        run_seeds(cfg, job.run_dir)
    return Outcome(json.loads(paths.seeds_summary.read_text()), None)


def ranks(world: World, argv: list[str] | None,
          ) -> tuple[list[str], Solo, Path | None, list[Path], Composed | None]:
    """`torchrun --nproc_per_node=N -m rltrain <argv>`: this rank of the data-parallel job, as
    `parallel.torchrun.prepare` sets it up (this rank's Hydra arguments, the job's collectives,
    the run folder rank 0 locks, the folders it created, the configuration it checked). `train()` (no `argv`) is refused: it
    trains in its caller's one process, and a torchrun job is one process per rank."""
    if argv is None:
        raise UserError(f"train() under torchrun (WORLD_SIZE={world.size}) would train "
                        f"{world.size} separate runs: data-parallel training is the command "
                        f"line's, one process per rank: torchrun --nproc_per_node={world.size} "
                        f"-m rltrain <overrides>")
    return prepare(argv, world)


def _finish_batch(runner: SeedRunner, job: Job) -> Outcome:
    with _run_log(job):
        summary = runner.run()
    return Outcome(summary, runner.signum)


def _one_algorithm_per_seed(job: Job, message: str) -> None:
    if job.algo is not None or job.callbacks:
        raise UserError(message)


def _no_ranks(job: Job) -> None:
    if job.collective.world.size > 1:
        raise UserError("num_seeds > 1 under torchrun: pick one (a batch of seeds runs in one "
                        "process; torchrun splits one seed's rollouts over processes)")


@contextlib.contextmanager
def _run_log(job: Job) -> Iterator[None]:
    """The run folder's `train.log` meanwhile, where Hydra does not write it."""
    with contextlib.nullcontext() if job.hydra else log_to(RunDir(job.run_dir).train_log):
        yield
