"""Checkpoint payloads of a Runner, restoring one, and the config rules of `resume=`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rltrain import checkpoint
from rltrain.config import TrainConfig, to_train_config
from rltrain.envs.make import load_resume_state, resume_state
from rltrain.envs.trust import named_code, require_named
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
    """Put a freshly built Runner back into the state stored in `payload` (checked first:
    a missing or mistyped field is a one-line `UserError`, before anything is changed)."""
    from rltrain.evaluate import load_algo
    from rltrain.payload import RESUME, check_fits, check_payload

    resume = runner.cfg.resume
    where = resume if resume not in (None, "", "auto") else "the checkpoint to resume"
    check_payload(payload, where, RESUME)
    check_fits(payload, runner.env.spec, getattr(runner.cfg.algo, "buffer_size", 0), where)
    load_algo(runner.algo, payload["algo"], Path(runner.run_dir))
    resumed = load_resume_state(runner.env, payload["env"])
    counters, s = payload["counters"], runner.state
    s.global_step, s.iteration = counters["global_step"], counters["iteration"]
    s.best_eval = float(counters["best_eval"])
    runner.schedule.update(payload["schedule"])
    # the stored last observation belongs to the restored episodes only; otherwise a fresh
    # reset, after the normalizer statistics are back, so its observation uses them
    loop = payload["loop"]
    runner.obs = (loop["obs"].to(runner.device) if resumed
                  else runner.env.reset(seed=runner.cfg.seed + s.global_step))
    runner.episodes.returns.extend(loop["episode_returns"])
    runner.episodes.lengths.extend(loop["episode_lengths"])
    runner.episodes.terminated, runner.episodes.truncated = loop["episode_counts"]
    s.metrics = dict(loop["metrics"])
    last_eval = payload["metrics"]
    s.last_eval = dict(last_eval) if "step" in last_eval else None
    checkpoint.set_rng_state(payload["rng"])
    if "replay" in payload:
        runner.replay_state = payload["replay"]
    if resumed:
        log.info("resumed at step %s exactly", f"{s.global_step:,}")
    else:
        log.warning("%s: %s; episodes restart on resume (at step %s)", runner.cfg.env.id,
                    resumed.reason, f"{s.global_step:,}")


def resume_config(saved: dict[str, Any], composed: dict[str, Any], overrides: list[str],
                  source: str = "the checkpoint") -> TrainConfig:
    """The saved config with the harmless overrides applied; refuse any that change the experiment.

    Code the saved env names (a module) must be named again in `overrides` (`envs/trust.py`).
    """
    env = saved.get("env")
    require_named(env if isinstance(env, dict) else {}, named_code(overrides), source)
    merged = dict(saved)
    for item in overrides:
        key = item.lstrip("+~").split("=", 1)[0]
        top = key.split(".")[0].split("/")[0]
        if key in ("env.import", "env.imports"):  # names trusted code; checked just above
            continue
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
