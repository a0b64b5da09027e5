"""Checkpoint payloads of a run and restoring one: a run's loop context written into a payload,
and read back from one (the config rules of `resume=` are `run_folder/resume_rules.py`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rltrain import obs as obs_ops
from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.payload import RESUME, check_fits, check_payload
from rltrain.config.schema import TrainConfig
from rltrain.envs.atari import check_frame_layout
from rltrain.envs.make import load_resume_state, resume_state
from rltrain.errors import UserError
from rltrain.evaluation.agent import load_algo
from rltrain.runner.context import LoopContext
from rltrain.runner.schedule import Schedule

log = logging.getLogger("rltrain")


def make_payload(ctx: LoopContext, schedule: Schedule, config: dict[str, Any],
                 save_buffer: bool) -> dict[str, Any]:
    """The checkpoint dict of a run: plain tensors and data only (see `rltrain.checkpoint.format`);
    `config` is the run's resolved config dict, `save_buffer` adds the replay buffer."""
    s, episodes = ctx.state, ctx.episodes
    payload = {
        "config": config,
        "algo": ctx.algo.state_dict(),
        "env": resume_state(ctx.env),
        "counters": {"global_step": s.global_step, "iteration": s.iteration,
                     "best_eval": s.best_eval},
        "schedule": schedule.state_dict(),
        "loop": {"obs": obs_ops.cpu_copy(ctx.obs),
                 "episode_returns": list(episodes.returns),
                 "episode_lengths": list(episodes.lengths),
                 # counts since the last log, and the latest update's metrics (the off-policy
                 # loop re-logs them until the next update): without them a resumed run logs
                 # different rows than an uninterrupted one
                 "episode_counts": [episodes.terminated, episodes.truncated],
                 "metrics": {k: float(v) for k, v in s.metrics.items()},
                 **({} if ctx.episode_starts is None else
                    {"episode_starts": ctx.episode_starts.detach().cpu().clone()})},
        "rng": checkpoint.rng_state(),
        # the latest evaluation, `step` included, so a resume does not repeat it
        "metrics": {k: v for k, v in (s.last_eval or {}).items()
                    if isinstance(v, (int, float, list))},
    }
    if ctx.replay is not None and save_buffer:
        payload["replay"] = ctx.replay.state_dict()
    return payload


SHARED_ALGO = ("policy", "optimizer")
"""Parts of an algorithm's state that every rank of a torchrun job holds alike (the rest, e.g.
a recurrent state per env or held gSDE noise, is per rank)."""


def rank_part(payload: dict[str, Any]) -> dict[str, Any]:
    """What a torchrun rank's checkpoint payload holds of its own: its envs, loop, random
    generators and per-rank algorithm state (the weights and optimizer are everyone's)."""
    algo = {k: v for k, v in payload["algo"].items() if k not in SHARED_ALGO}
    return {"env": payload["env"], "loop": payload["loop"], "rng": payload["rng"], "algo": algo}


def with_ranks(payload: dict[str, Any], parts: list[dict[str, Any]] | None,
               size: int) -> dict[str, Any]:
    """Rank 0's payload (what `rltrain eval` and `export` read) with every other rank's own
    part (`rank_part`, in rank order) under `world`, so a resume at this world size is exact;
    `parts` None: rank 0's alone (`best.pt`, written while only rank 0 evaluates)."""
    return {**payload, "world": {"size": size, "ranks": parts[1:] if parts else []}}


def for_rank(payload: dict[str, Any], rank: int, size: int, where: str) -> dict[str, Any]:
    """The payload rank `rank` of a `size`-rank job resumes from; a checkpoint of another
    world size is refused in one line."""
    saved = int(payload.get("world", {}).get("size", 1))
    if saved != size:
        raise UserError(f"{where} was written by {saved} rank{'s' if saved != 1 else ''}; "
                        f"resuming with {size} would change each rank's envs and seeds: resume "
                        f"with torchrun --nproc_per_node={saved} (per node) instead")
    ranks = payload.get("world", {}).get("ranks", [])
    if size > 1 and len(ranks) != size - 1:
        raise UserError(f"{where} holds rank 0's state only (best.pt: written while rank 0 "
                        f"evaluated); resume from the run's latest.pt or a step_*.pt")
    if rank == 0:
        return payload
    own = ranks[rank - 1]
    return {**payload, "env": own["env"], "loop": own["loop"], "rng": own["rng"],
            "algo": {**payload["algo"], **own["algo"]}}


class Restored(NamedTuple):
    """Where a restored run continues: its env step, and why its episodes restart (None: they
    continue exactly)."""

    step: int
    restart: str | None


def restore(ctx: LoopContext, schedule: Schedule, payload: dict[str, Any], cfg: TrainConfig,
            run_dir: Path) -> Restored:
    """Put a freshly built run (`ctx`, `schedule`, `ctx.replay`) back into the state stored in
    `payload` (checked first: a missing or mistyped field is a one-line `UserError`, before
    anything is changed); `say_resumed` says how it went."""
    where = cfg.resume if cfg.resume not in (None, "", "auto") else "the checkpoint to resume"
    check_payload(payload, where, RESUME)
    check_frame_layout(cfg.env, cfg.algo.net.encoder, payload["algo"], where)
    world = ctx.collective.world
    payload = for_rank(payload, world.rank, world.size, where)
    if world.rank > 0:  # this rank's own parts, checked as closely as rank 0's
        check_payload(payload, where, RESUME)
    check_fits(payload, ctx.env.spec, ctx.replay, where)
    done, total = payload["counters"]["global_step"], ctx.state.total_timesteps
    # a smaller budget than the steps done would write final.pt at once, as if the run had
    # been asked for fewer; the run's own budget may be passed (parallel envs overshoot it)
    if done > total and total != payload["config"].get("total_timesteps"):
        raise UserError(f"resume: {where} has trained {done:,} env steps, more than "
                        f"total_timesteps={total:,}; give total_timesteps={done:,} or more")
    load_algo(ctx.algo, payload["algo"], Path(run_dir))
    resumed = load_resume_state(ctx.env, payload["env"])
    counters, s = payload["counters"], ctx.state
    s.global_step, s.iteration = counters["global_step"], counters["iteration"]
    s.best_eval = float(counters["best_eval"])
    schedule.load_state_dict(payload["schedule"])
    # the stored last observation belongs to the restored episodes only; otherwise a fresh
    # reset, after the normalizer statistics are back, so its observation uses them
    loop = payload["loop"]
    ctx.obs = (obs_ops.apply(lambda t: t.to(ctx.device), loop["obs"]) if resumed
               else ctx.env.reset(seed=cfg.seed + s.global_step
                                  + world.rank * ctx.env.spec.num_envs))
    starts = loop.get("episode_starts")  # restarted episodes: every row starts one (None)
    ctx.episode_starts = (starts.to(ctx.device, torch.bool) if resumed
                          and isinstance(starts, torch.Tensor) and starts.shape == (obs_ops.rows(ctx.obs),)
                          else None)
    _restore_episodes(ctx, loop)
    last_eval = payload["metrics"]
    s.last_eval = dict(last_eval) if "step" in last_eval else None
    checkpoint.set_rng_state(payload["rng"])
    _restore_replay(ctx, payload.get("replay"))
    return Restored(s.global_step, None if resumed else resumed.reason)


def say_resumed(env_id: str, restored: dict[int, Restored], batch: bool = False) -> None:
    """How a resume went, once: for a run, or (`batch`) for the seeds of a batch (`restored`
    by seed), one line per outcome naming its seeds, not one line per seed."""
    outcomes: dict[str | None, dict[int, int]] = {}
    for seed, (step, why) in restored.items():
        outcomes.setdefault(why, {})[seed] = step
    for why, steps in outcomes.items():
        alike = len(set(steps.values())) == 1
        at = (f"at step {next(iter(steps.values())):,}" if alike else
              ", ".join(f"seed {seed} at step {step:,}" for seed, step in steps.items()))
        seeds = f"seed{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}"
        if why is None:
            log.info("%sresumed %s exactly", f"{seeds} " if batch and alike else "", at)
        else:  # the same reason for every seed of a batch: one env config
            log.warning("%s: %s; episodes restart on resume (%s%s)", env_id, why,
                        f"{seeds}, " if batch and alike else "", at)


def _restore_episodes(ctx: LoopContext, loop: dict[str, Any]) -> None:
    """The episode statistics and latest update metrics of a checkpoint's `loop`."""
    ctx.episodes.returns.extend(loop["episode_returns"])
    ctx.episodes.lengths.extend(loop["episode_lengths"])
    ctx.episodes.terminated, ctx.episodes.truncated = loop["episode_counts"]
    ctx.state.metrics = dict(loop["metrics"])


def _restore_replay(ctx: LoopContext, saved: dict[str, Any] | None) -> None:
    """Refill the off-policy replay buffer from a checkpoint's `replay`, when it has one."""
    if ctx.replay is None:
        return
    if saved is not None:
        ctx.replay.load_state_dict(saved)
        log.info("replay buffer restored: %s transitions", f"{ctx.replay.size:,}")
    elif ctx.state.global_step > 0:
        log.info("replay buffer starts empty (checkpoint.save_buffer=false): resume is not bit-for-bit")
