"""What a batch folder holds for `resume=<batch>`, seed by seed: the seeds to train (each from its
`latest.pt`, or from the start), those complete at the budget, and those that failed before
(`seeds.json`). Reads checkpoints (torch); catching the seeds up is `seed_batch/resume.py`."""

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
from rltrain.errors import UserError
from rltrain.run_folder.batch import batch_seeds

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
            if paths.seed(seed).final.is_file() and step_of(payload) >= cfg.total_timesteps:
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


def step_of(payload: dict[str, Any]) -> int:
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
