"""`resume=<batch folder>`: every seed of a batch from where it is, none dropped.

A batch trains its seeds in lockstep, but a batch cut short (a kill, a full disk, a seed that
failed, one seed resumed alone) can leave them at different steps. The resume reads each seed's
folder: a seed complete at the budget is counted as it is; a seed behind the furthest one
catches up alone (its own single-run loop, the same code) and then joins the batch; a seed
without any checkpoint starts over and catches up; a seed that failed before (`seeds.json`)
stays out, said in one line. One function for the command line and `train()`. What the
folder holds, seed by seed, is read by `run_folder/batch_state.py`; here the seeds behind catch up.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import TrainingError
from rltrain.run_folder.batch_state import Members, step_of
from rltrain.runner.interrupt import GracefulStop
from rltrain.runner.restore import Restored, say_resumed
from rltrain.runner.runner import Runner
from rltrain.seed_batch.batch import seed_lines

log = logging.getLogger("rltrain")


def catch_up(members: Members, folder: Path, stopper: GracefulStop,
             failed: dict[int, str]) -> Members:
    """`members` of the batch in `folder` all at the furthest one's step: each seed behind
    trains alone (its single run's loop) to that step and writes its `latest.pt`, then is read
    back. A seed that fails on the way joins `failed`; a stop (`stopper`, the batch's) ends the
    catching up where it is."""
    steps = {s: step_of(p) if p is not None else 0 for s, (_, p) in members.items()}
    top = max(steps.values(), default=0)
    out: Members = {}
    for seed, (cfg, payload) in members.items():
        if steps[seed] >= top or stopper.heard is not None:
            out[seed] = (cfg, payload)
            continue
        # how it resumed: in the line below; its setup: the batch's lines; a stop names the
        # batch; a seed of a batch evaluates in the training process
        with seed_lines(seed):
            runner = Runner(cfg, RunDir(folder).seed(seed).root, resume_from=payload,
                            resume_line=False, setup_lines=False, stop_line=False,
                            resume_target=folder, background_eval=False)
        _say_catching_up(seed, steps[seed], top, runner.restored, cfg.env.id)
        runner.stopper.states.append(stopper.state)  # a signal here stops the batch too
        try:
            with seed_lines(seed):  # its run's own lines (start, evaluations) name the seed
                runner.run_to(top)
        except TrainingError as exc:
            failed[seed] = str(exc)
            log.error("[seed %d] stopped: %s; the other seeds go on", seed, exc)
            continue
        if runner.stopper.signum is not None:
            stopper.signum = runner.stopper.signum
        latest = RunDir(runner.run_dir).latest
        out[seed] = (dataclasses.replace(cfg, resume=str(latest)), checkpoint.load(latest))
    return out


def _say_catching_up(seed: int, step: int, top: int, restored: Restored | None,
                     env_id: str) -> None:
    """The one line on a seed that catches up alone: where it is, where the batch is, and how
    its run resumed (`restored`; None: it starts over)."""
    exact = restored is not None and restored.restart is None
    log.info("resume: seed %d is at step %s, the batch at %s: it catches up alone first%s",
             seed, f"{step:,}", f"{top:,}", " (resumed exactly)" if exact else "")
    if restored is not None and not exact:  # why its episodes restart, naming the seed
        say_resumed(env_id, {seed: restored}, batch=True)
