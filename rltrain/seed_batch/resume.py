"""`resume=<batch folder>`: every seed of a batch from where it is, none dropped.

A batch trains its seeds in lockstep, but a batch cut short (a kill, a full disk, a seed that
failed, one seed resumed alone) can leave them at different steps. The resume reads each seed's
folder: a seed complete at the budget is counted as it is; a seed behind the furthest one
catches up alone (its own single-run loop, the same code) and then joins the batch; a seed
without any checkpoint starts over and catches up; a seed that failed before (`seeds.json`)
stays out, said in one line. One function for the command line and `train()`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.schema import TrainConfig
from rltrain.envs.trust import resume_command
from rltrain.errors import TrainingError, UserError
from rltrain.runner.interrupt import GracefulStop
from rltrain.runner.resume import Restored, say_resumed
from rltrain.runner.runner import Runner
from rltrain.seed_batch.batch import seed_lines
from rltrain.seed_batch.folder import batch_seeds

log = logging.getLogger("rltrain")

Members = dict[int, tuple[TrainConfig, "dict[str, Any] | None"]]
"""Seed -> (the config its run trains with, its checkpoint payload; None: it starts over)."""


@dataclasses.dataclass
class BatchState:
    """What a batch folder holds, seed by seed, for a resume to `total_timesteps`."""

    members: Members
    """The seeds to train (from their `latest.pt`, or from the start)."""
    complete: dict[int, dict[str, Any]]
    """Seed -> its final evaluation: complete at (or beyond) the budget."""
    failed: dict[int, str]
    """Seed -> why it failed, from `seeds.json`: left out."""


def read_batch(folder: Path, config_of: Callable[[dict[str, Any]], TrainConfig]) -> BatchState:
    """Each seed of the batch in `folder` (`config_of(saved config dict)`: the config its
    resume trains with, the overrides checked). A batch complete at the budget is refused as a
    finished run is."""
    seeds = batch_seeds(folder) or []
    paths = RunDir(folder)
    failed = {s: why for s, why in _failed_before(paths).items() if s in seeds}
    members: Members = {}
    complete: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        if seed in failed:
            log.warning("resume: seed %d failed before (%s) and stays out; its last good "
                        "checkpoint is in %s", seed, failed[seed], paths.seed(seed).checkpoints)
            continue
        ckpt = paths.seed(seed).latest
        if ckpt.is_file():
            payload = checkpoint.load(ckpt)
            # a resume names its checkpoint (the batch's own `resume=auto` would read as a new
            # run's, which a finished seed refuses)
            cfg = dataclasses.replace(config_of(payload["config"]), resume=str(ckpt))
            if paths.seed(seed).final.is_file() and _step(payload) >= cfg.total_timesteps:
                complete[seed] = _final_result(paths.seed(seed).final)
            else:
                members[seed] = (cfg, payload)
    if not members and not complete:
        raise UserError(f"resume: no seed of the batch in {folder} has a checkpoint "
                        "(seed_<s>/checkpoints/latest.pt) to resume from")
    if not members:  # as a finished single run is
        step = max(int(r.get("step", 0)) for r in complete.values())
        raise UserError(f"{folder} holds a finished batch of seeds (at step {step:,}); train "
                        f"it longer with `{resume_command(folder, None)} total_timesteps=<more "
                        f"than {step}>`, or choose another hydra.run.dir")
    template = next(iter(members.values()))[0] if members else None
    for seed in seeds:
        if seed not in members and seed not in complete and seed not in failed:
            if template is None:
                continue
            log.warning("resume: seed %d has no checkpoint: it starts over in %s and catches up",
                        seed, paths.seed(seed).root)
            members[seed] = (dataclasses.replace(template, seed=seed, resume="auto"), None)
    return BatchState(dict(sorted(members.items())), complete, failed)


def catch_up(members: Members, folder: Path, stopper: GracefulStop,
             failed: dict[int, str]) -> Members:
    """`members` of the batch in `folder` all at the furthest one's step: each seed behind
    trains alone (its single run's loop) to that step and writes its `latest.pt`, then is read
    back. A seed that fails on the way joins `failed`; a stop (`stopper`, the batch's) ends the
    catching up where it is."""
    steps = {s: _step(p) if p is not None else 0 for s, (_, p) in members.items()}
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


def _step(payload: dict[str, Any]) -> int:
    return int(payload.get("counters", {}).get("global_step", 0))


def _final_result(final: Path) -> dict[str, Any]:
    """A complete seed's final evaluation, as its `final.pt` holds it."""
    metrics = checkpoint.load(final).get("metrics", {})
    return {"mean_reward": float(metrics.get("mean_reward", float("nan"))),
            "std_reward": float(metrics.get("std_reward", float("nan"))),
            "episodes": int(metrics.get("episodes", 0)), "step": int(metrics.get("step", 0))}


def _failed_before(paths: RunDir) -> dict[int, str]:
    """Seed -> why, for the seeds `seeds.json` says failed (none when it is absent or unreadable)."""
    try:
        failed = json.loads(paths.seeds_summary.read_text()).get("failed") or {}
        return {int(s): str(why) for s, why in failed.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}
