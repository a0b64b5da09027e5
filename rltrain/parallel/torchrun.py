"""`torchrun --nproc_per_node=N -m rltrain ...`: every rank trains the same run, rank 0 picks
and writes its folder.

Every rank composes and validates the same command line (a mistake fails on every rank at
once, before any process group exists). Rank 0 then picks the run folder (`outputs/<date>/
<time>`, or the one `resume=` names) and sends it to the others, so one folder exists whatever
the rank count; the other ranks run Hydra with no output of their own (no `.hydra/`, no
`train.log`) and print only errors, prefixed with their rank. When torchrun restarts a failed
group (`--max-restarts`), rank 0 finds the folder of the first attempt and the group resumes
from its `latest.pt` (`resume=auto`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

from rltrain.config.compose import Composed, compose_job
from rltrain.config.registry import get_algo_spec
from rltrain.errors import TrainingError, UserError
from rltrain.parallel.world import Solo, World
from rltrain.run_folder.argv import arg_value, budget
from rltrain.run_folder.claim import claim_run_dir, with_run_dir
from rltrain.run_folder.find import resume_run_dir, resumed_config
from rltrain.run_folder.lock import check_target
from rltrain.runner.setup import check_data_parallel, resolve_device

POINTERS = Path("outputs") / ".torchrun"
"""Where rank 0 notes each job's run folder, for a restarted group to find it."""
QUIET = ["hydra.output_subdir=null", "hydra/job_logging=none", "hydra/hydra_logging=none"]
"""What ranks other than 0 add: Hydra writes nothing for them."""


def prepare(argv: list[str], world: World,
            ) -> tuple[list[str], Solo, Path | None, list[Path], Composed | None]:
    """(this rank's Hydra arguments, the job's collectives, the run folder for rank 0 to lock
    and check, None on the other ranks; the folders rank 0 created for it; the configuration
    checked here, for the job to take, None for a resume)."""
    if any(a in ("-m", "--multirun") for a in argv):
        raise UserError("a sweep (-m) under torchrun would run every job on every rank: start "
                        "torchrun per job, or sweep without torchrun (hydra/launcher=...)")
    # resume=<run>: checked against the saved config, as a plain `rltrain resume=` is
    resumed = resumed_config(argv)
    composed = None if resumed else compose_job(argv, normalized=True)
    cfg = resumed or composed.train_cfg
    check_data_parallel(cfg.algo.name, get_algo_spec(cfg.algo.name).family, world.size)
    device = resolve_device(cfg.device)
    if device.type == "cuda":  # each rank its own GPU: cuda:$LOCAL_RANK
        argv = [*argv, f"device=cuda:{world.local_rank}"]
        device = resolve_device(f"cuda:{world.local_rank}")
    # torch.distributed: imported only under torchrun
    from rltrain.parallel.process_group import join

    collective = join(world, device)
    quiet_other_ranks(world)
    created: list[Path] = []
    if world.is_main:
        try:
            argv, extra, target, created = _pick_run_dir(argv)
        except (UserError, TrainingError) as exc:  # every rank stops, rank 0 says why
            collective.broadcast(("error", EXIT_CODES[type(exc)]))
            raise
        sent = collective.broadcast(("ok", (argv, extra, str(target))))
    else:
        sent = collective.broadcast(None)
        if sent[0] == "error":
            collective.abort()
            sys.exit(sent[1])
    argv, extra, target = sent[1]
    hydra_args = with_run_dir([*argv, *extra], target)
    if not world.is_main:
        return [*hydra_args, *QUIET], collective, None, [], composed
    return hydra_args, collective, Path(target), created, composed


EXIT_CODES = {UserError: 2, TrainingError: 1}


def _pick_run_dir(argv: list[str]) -> tuple[list[str], list[str], Path, list[Path]]:
    """Rank 0: (the arguments, with those a restart adds; what `resume=` adds; the run folder,
    checked the way a plain run's is, so a refusal comes before anything runs; the folders
    claiming it created)."""
    argv = restarted(argv)
    extra = resume_run_dir(argv)
    target, created = claim_run_dir([*argv, *extra])
    if target is None:
        raise UserError("torchrun needs one run folder: give hydra.run.dir=<folder> "
                        "without ${...} interpolations, or leave it to rltrain")
    check_target(target, arg_value(argv, "resume"), budget(argv))
    note_run_dir(argv, target)
    return argv, extra, target, created


def quiet_other_ranks(world: World) -> None:
    """Ranks other than 0 print errors only, each line prefixed with the rank."""
    if world.is_main:
        return
    logger = logging.getLogger("rltrain")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"[rank {world.rank}] %(levelname)s %(message)s"))
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.ERROR)


def _pointer(argv: list[str]) -> Path:
    """This job's note of its run folder: torchrun's run id and the command line name it."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    digest = hashlib.sha1("\0".join(argv).encode()).hexdigest()[:12]
    return POINTERS / f"{run_id}-{digest}"


def note_run_dir(argv: list[str], target: Path) -> None:
    """Remember the first attempt's run folder (a restarted group reads it back)."""
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0:
        pointer = _pointer(argv)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.write_text(str(target.absolute()))


def restarted(argv: list[str]) -> list[str]:
    """A group torchrun restarted continues the first attempt's run: in its folder, from its
    `latest.pt` (`resume=auto`). Unchanged on a first attempt or with a `resume=` given."""
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0 or arg_value(argv, "resume"):
        return argv
    pointer = _pointer(argv)
    if not pointer.is_file():
        return argv
    logging.getLogger("rltrain").warning("torchrun restarted the group: resuming %s",
                                         pointer.read_text())
    return [*argv, "resume=auto", f"hydra.run.dir={pointer.read_text()}"]
