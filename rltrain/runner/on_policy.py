"""The on-policy loop (PPO, A2C): collect a rollout, compute GAE, update. Read top to bottom.

It trains a batch of runs together (`context.LoopBatch`): a seed batch, or a single run as a
batch of one (`runner/one_run.py`). The algorithm takes and returns every value per run (`x[k]`
is run k's, `runner/members.py`); each run keeps its own env, episode records and loop state,
and its env columns of the one rollout storage (column k*N + i is run k's env i; GAE never mixes
columns). A single run's tensors go to its algorithm and its storage as they are.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import torch

from rltrain import obs as obs_ops
from rltrain.buffers.replay import obs_storage_dtype
from rltrain.buffers.rollout import RolloutBuffer
from rltrain.envs.masks import action_mask
from rltrain.envs.normalize import merge_statistics
from rltrain.obs import join
from rltrain.runner.callbacks import LoopState
from rltrain.runner.context import LoopBatch
from rltrain.runner.members import PerRun
from rltrain.types import RolloutBatch, StepResult, action_dtype, action_shape

log = logging.getLogger("rltrain")


def run_on_policy(runs: LoopBatch) -> None:
    """Train every run until the step budget is spent, a stop is asked for, or none is left."""
    lead = runs.ctxs[0]
    cfg, spec, n_steps = lead.cfg, lead.env.spec, lead.cfg.n_steps
    stored = obs_ops.layout(lead.obs, obs_storage_dtype)  # (shape, dtype), or per Dict entry
    shape, dtype = (stored, torch.float32) if isinstance(stored, dict) else stored
    make_buffer = partial(RolloutBuffer, obs_shape=shape, action_shape=action_shape(spec),
                          action_dtype=action_dtype(spec), device=lead.device, obs_dtype=dtype)
    per_step = spec.num_envs * lead.collective.world.size  # env steps of one vector step, all ranks
    log_budget(lead.state, n_steps, per_step)
    buf = make_buffer(n_steps, len(runs.ctxs) * spec.num_envs)
    while runs.ctxs and not runs.finished():
        runs.fire("pre_iteration")
        state = runs.ctxs[0].state  # every run is at the same step
        steps = rollout_steps(state, n_steps, per_step)
        if (steps, len(runs.ctxs) * spec.num_envs) != (buf.n_steps, buf.num_envs):
            buf = make_buffer(steps, len(runs.ctxs) * spec.num_envs)  # the last rollout, or fewer runs
        # ---- collect one rollout of every run ---------------------------------------------
        runs.fire("pre_rollout")
        t0 = time.perf_counter()
        env_seconds = collect(runs, buf, steps, per_step)
        for ctx in runs.ctxs:
            merge_statistics(ctx.env, ctx.collective)  # torchrun: every rank normalizes alike
        runs.fire("post_rollout")
        # ---- advantages and one update of every run -------------------------------------------
        t1 = time.perf_counter()
        last_values = runs.algo.value([c.obs for c in runs.ctxs], *episode_starts(runs))
        batches = per_run(buf.finish(join(last_values), cfg.gamma, cfg.gae_lambda),
                          steps, len(runs.ctxs))
        runs.fire("pre_update")
        progress_remaining = max(0.0, 1.0 - state.global_step / state.total_timesteps)
        metrics = runs.algo.update(batches, progress_remaining=progress_remaining)
        t2 = time.perf_counter()
        rewards, values = (per_seed_columns(x, len(runs.ctxs)) for x in (buf.rewards, buf.values))
        for k, (ctx, m) in enumerate(zip(runs.ctxs, metrics, strict=True)):
            ctx.state.iteration += 1
            ctx.timer.add("env", env_seconds)  # a batch's times: every run shares them
            ctx.timer.add("act", t1 - t0 - env_seconds)  # the policy and the rollout storage
            ctx.timer.add("update", t2 - t1)
            m.update({"rollout/mean_reward": float(rewards[k].mean()),
                      "rollout/mean_value": float(values[k].mean())})
            ctx.state.metrics = m
        runs.fire("post_update")
        for ctx in runs.ctxs:  # torchrun: over all ranks, with what a callback set too
            ctx.state.metrics = ctx.collective.mean_metrics(ctx.state.metrics)
        # ---- each run logs, evaluates and checkpoints; a failed seed leaves the batch -------
        runs.end_iteration()


def collect(runs: LoopBatch, buf: RolloutBuffer, steps: int, per_step: int) -> float:
    """`steps` vector steps of every run into `buf` (run k's envs are its columns k*N...);
    returns the seconds spent in the envs."""
    env_seconds = 0.0
    starts = episode_starts(runs)  # () for policies without memory
    for _ in range(steps):
        masks = run_masks(runs)  # None unless the env says which actions are valid
        obs = [c.obs for c in runs.ctxs]
        action, log_prob, value = runs.algo.act(obs, masks, *starts)
        te = time.perf_counter()
        results = runs.step_envs(action)
        env_seconds += time.perf_counter() - te
        reward, terminated, truncated = step_rows(results)
        buf.add(join(obs), join(action), join(log_prob), join(value), reward, terminated,
                truncated, None if masks is None else join(masks))
        if truncated.any():  # time limits: bootstrap from V(final obs), not from 0
            buf.truncated_values[buf.step - 1, truncated] = join(
                cut_values(runs.algo, results, bool(starts)))[truncated]
        for ctx, res in zip(runs.ctxs, results, strict=True):
            ctx.episodes.record(res)
            ctx.obs = res.obs
            ctx.state.global_step += per_step
        if starts:  # memory: the next act zeroes the state of the rows that begin an episode
            for ctx, res in zip(runs.ctxs, results, strict=True):
                ctx.episode_starts = res.terminated | res.truncated
            starts = episode_starts(runs)
    if not starts:  # for the checkpoint (a policy without memory reads none)
        for ctx, res in zip(runs.ctxs, results, strict=True):
            ctx.episode_starts = res.terminated | res.truncated
    return env_seconds


def step_rows(results: list[StepResult]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reward, terminated, truncated) of every run's step as one `[S*N]` each, run k's rows
    k*N ...; a single run's are its own tensors."""
    if len(results) == 1:
        res = results[0]
        return res.reward, res.terminated, res.truncated
    return (torch.cat([r.reward for r in results]), torch.cat([r.terminated for r in results]),
            torch.cat([r.truncated for r in results]))


def cut_values(algo: Any, results: list[StepResult], recurrent: bool) -> PerRun:
    """V(final observation) `[N]` per run, wanted for the rows a time limit ended. With memory
    every row is evaluated, from the state after this step; runs that act alone
    (`runner/members.py`: a single run) evaluate only the cut rows, as a single run always has."""
    final_obs = [r.final_obs for r in results]
    if recurrent:
        return algo.value(final_obs)
    return algo.value(final_obs, rows=[r.truncated for r in results])


def episode_starts(runs: LoopBatch) -> tuple[list[torch.Tensor], ...]:
    """`(starts,)`, `[N]` per run: the rows whose current observation begins an episode (all
    of them before a run's first step), for policies with memory; `()` for the others."""
    if not getattr(runs.algo, "recurrent", False):
        return ()
    return ([c.episode_starts if c.episode_starts is not None else
             torch.ones(c.env.spec.num_envs, dtype=torch.bool, device=c.device)
             for c in runs.ctxs],)


def run_masks(runs: LoopBatch) -> list[torch.Tensor] | None:
    """Every run's valid actions at its current observations, `[N, n]` per run, or None (an
    unmasked env: the runs all run the same env)."""
    masks = [action_mask(c.env) for c in runs.ctxs]
    return None if masks[0] is None else masks


def per_seed_columns(x: torch.Tensor, seeds: int) -> torch.Tensor:
    """`[T, S*N, ...]` storage as `[S, T, N, ...]` (run k's columns, as its own buffer's)."""
    return x.unflatten(1, (seeds, -1)).transpose(0, 1).contiguous()


def per_run(batch: RolloutBatch, steps: int, seeds: int) -> list[RolloutBatch]:
    """The buffer's flattened `[T*S*N, ...]` batch as each run's own `[T*N, ...]`: row t*N + i
    of run k is what run k's own buffer would flatten to row t*N + i (a single run's batch is
    the buffer's, as it is)."""
    if seeds == 1:
        return [batch]

    def split(x: torch.Tensor) -> torch.Tensor:
        return per_seed_columns(x.unflatten(0, (steps, -1)), seeds).flatten(1, 2)

    columns = [None if x is None else obs_ops.apply(split, x) for x in batch]
    return [RolloutBatch(*(None if x is None else obs_ops.take(x, k) for x in columns))
            for k in range(seeds)]


def rollout_steps(state: LoopState, n_steps: int, num_envs: int) -> int:
    """Steps per env of the next rollout: `n_steps`, fewer for the last one, so that a run takes
    ceil(total_timesteps / num_envs) * num_envs env steps (every env steps each time)."""
    left = state.total_timesteps - state.global_step
    return max(1, min(n_steps, -(-left // num_envs)))


def log_budget(state: LoopState, n_steps: int, num_envs: int) -> None:
    """Say at the start when the budget ends inside a rollout, and how many env steps it takes."""
    per_env = -(-(state.total_timesteps - state.global_step) // num_envs)
    last = per_env % n_steps
    if per_env <= 0 or last == 0:
        return
    steps = state.global_step + per_env * num_envs
    over = steps - state.total_timesteps
    log.info("total_timesteps=%s is not a multiple of the rollout (algo.n_steps=%d x %d envs): "
             "the last rollout is shortened to %d steps per env; %s env steps in all%s",
             f"{state.total_timesteps:,}", n_steps, num_envs, last, f"{steps:,}",
             f" ({over} past total_timesteps, as every env steps each time)" if over else "")
