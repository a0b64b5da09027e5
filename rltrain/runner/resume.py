"""Checkpoint payloads of a Runner, restoring one, and the config rules of `resume=`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rltrain import checkpoint
from rltrain.config import TrainConfig, to_train_config
from rltrain.envs.make import load_resume_state, resume_state
from rltrain.errors import UserError

if TYPE_CHECKING:
    from rltrain.runner.runner import Runner

log = logging.getLogger("rltrain")

# Overrides that may change when resuming: budgets, logging, evaluation and checkpoint cadence.
RESUMABLE = ("total_timesteps", "progress", "device", "torch_threads", "logger", "eval",
             "checkpoint", "resume", "hydra")


def make_payload(runner: Runner) -> dict[str, Any]:
    """The checkpoint dict of a run: plain tensors and data only (see `rltrain.checkpoint`)."""
    s = runner.state
    payload = {
        "config": runner.config_dict,
        "algo": runner.algo.state_dict(),
        "env": resume_state(runner.env),
        "counters": {"global_step": s.global_step, "iteration": s.iteration,
                     "best_eval": s.best_eval},
        "schedule": dict(runner.schedule),
        "loop": {"obs": runner.obs.detach().cpu().clone(),
                 "episode_returns": list(runner.episodes.returns),
                 "episode_lengths": list(runner.episodes.lengths),
                 # counts since the last log, and the latest update's metrics (the off-policy
                 # loop re-logs them until the next update): without them a resumed run logs
                 # different rows than an uninterrupted one
                 "episode_counts": [runner.episodes.terminated, runner.episodes.truncated],
                 "metrics": {k: float(v) for k, v in s.metrics.items()}},
        "rng": checkpoint.rng_state(),
        # the latest evaluation, `step` included, so a resume does not repeat it
        "metrics": {k: v for k, v in (s.last_eval or {}).items()
                    if isinstance(v, (int, float, list))},
    }
    replay = getattr(runner, "replay", None)
    if replay is not None and runner.cfg.checkpoint.save_buffer:
        payload["replay"] = replay.state_dict()
    return payload


def restore(runner: Runner, payload: dict[str, Any]) -> None:
    """Put a freshly built Runner back into the state stored in `payload`."""
    from rltrain.evaluate import load_algo

    load_algo(runner.algo, payload["algo"], Path(runner.run_dir))
    exact = load_resume_state(runner.env, payload.get("env", {}))
    counters = payload["counters"]
    s = runner.state
    s.global_step, s.iteration = int(counters["global_step"]), int(counters["iteration"])
    s.best_eval = float(counters["best_eval"])
    runner.schedule.update(payload.get("schedule", {}))
    loop = payload.get("loop", {})
    if exact and "obs" in loop:
        runner.obs = loop["obs"].to(runner.device)
    runner.episodes.returns.extend(loop.get("episode_returns", []))
    runner.episodes.lengths.extend(loop.get("episode_lengths", []))
    runner.episodes.terminated, runner.episodes.truncated = loop.get("episode_counts", [0, 0])
    s.metrics = dict(loop.get("metrics", {}))
    last_eval = payload.get("metrics", {})
    s.last_eval = dict(last_eval) if "step" in last_eval else None
    checkpoint.set_rng_state(payload["rng"])
    if "replay" in payload:
        runner.replay_state = payload["replay"]
    how = "exactly" if exact else "from freshly reset envs (env state not restorable)"
    log.info("resumed at step %s %s", f"{s.global_step:,}", how)


def resume_config(saved: dict[str, Any], composed: dict[str, Any], overrides: list[str]) -> TrainConfig:
    """The saved config with the harmless overrides applied; refuse any that change the experiment."""
    merged = dict(saved)
    for item in overrides:
        key = item.lstrip("+~").split("=", 1)[0]
        top = key.split(".")[0].split("/")[0]
        if top not in RESUMABLE:
            old, new = _get(saved, key), _get(composed, key)
            only = f"only {', '.join(RESUMABLE[:-2])} may change when resuming"
            if old is _ABSENT and new is _ABSENT:  # a preset group (debug=, tuned=): not a value
                raise UserError(f"resume: `{item}` selects a preset, which cannot be applied to a "
                                f"resumed run; {only}")
            if old != new:
                old, new = (None if v is _ABSENT else v for v in (old, new))
                raise UserError(
                    f"resume: `{item}` would change the experiment ({key}: {old!r} -> {new!r}); "
                    f"{only}")
            continue
        if top in composed and top != "hydra":
            merged[top] = composed[top]
    return to_train_config(merged)


_ABSENT = object()  # a key that is not in the config (as opposed to one set to None)


def _get(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    if key in ("algo", "env"):  # a group choice: compare what it selects
        key = {"algo": "algo.name", "env": "env.id"}[key]
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def find_resume_checkpoint(resume: str, run_dir: Path) -> Path | None:
    """The checkpoint `resume=` points at; `auto` means this run dir's latest.pt, if any."""
    if resume == "auto":
        latest = run_dir / "checkpoints" / "latest.pt"
        return latest if latest.is_file() and not (run_dir / "checkpoints" / "final.pt").exists() else None
    return checkpoint.resolve(resume)


def run_dir_of(ckpt: Path) -> Path:
    """`<run>` for `<run>/checkpoints/x.pt`."""
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent


def load_for_resume(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load a checkpoint to resume from (same checks as any load)."""
    return checkpoint.load(path, map_location=device)
