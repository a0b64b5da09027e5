"""The on-policy loop over a batch of seeds: `runner/on_policy.py`, with one policy call for all
seeds at each step and one batched update. Each seed keeps its own env, rollout buffer,
episode records and loop state. Read top to bottom."""

from __future__ import annotations

import time
from functools import partial

import torch

from rltrain import obs as obs_ops
from rltrain.buffers.replay import obs_storage_dtype
from rltrain.buffers.rollout import RolloutBuffer
from rltrain.envs.masks import action_mask
from rltrain.runner.on_policy import log_budget, rollout_steps
from rltrain.seed_batch.batch import SeedBatch
from rltrain.types import RolloutBatch, action_dtype, action_shape


def run_seed_batch(seeds: SeedBatch) -> None:
    """Train every seed until the step budget is spent, a stop is asked for, or none is left."""
    lead = seeds.ctxs[0]
    cfg, spec, n_steps = lead.cfg, lead.env.spec, lead.cfg.n_steps
    shape, dtype = obs_ops.layout(lead.obs, obs_storage_dtype)
    # one buffer for all seeds: env column k*N + i is seed k's env i (GAE never mixes columns)
    make_buffer = partial(RolloutBuffer, obs_shape=shape, action_shape=action_shape(spec),
                          action_dtype=action_dtype(spec), device=lead.device, obs_dtype=dtype)
    per_step = spec.num_envs
    log_budget(lead.state, n_steps, per_step)
    buf = make_buffer(n_steps, len(seeds.ctxs) * per_step)
    while seeds.ctxs and not seeds.finished():
        seeds.fire("pre_iteration")
        state = seeds.ctxs[0].state  # every seed is at the same step
        steps = rollout_steps(state, n_steps, per_step)
        if (steps, len(seeds.ctxs) * per_step) != (buf.n_steps, buf.num_envs):
            buf = make_buffer(steps, len(seeds.ctxs) * per_step)  # the last rollout, or fewer seeds
        # ---- collect one rollout of every seed -------------------------------------------
        seeds.fire("pre_rollout")
        t0 = time.perf_counter()
        env_seconds = collect(seeds, buf, steps)
        seeds.fire("post_rollout")
        # ---- advantages and one batched update ----------------------------------------------
        t1 = time.perf_counter()
        last_values = seeds.algo.value(torch.stack([c.obs for c in seeds.ctxs]),
                                       *episode_starts(seeds))
        batch = per_seed(buf.finish(last_values.flatten(), cfg.gamma, cfg.gae_lambda),
                         steps, len(seeds.ctxs))
        seeds.fire("pre_update")
        progress_remaining = max(0.0, 1.0 - state.global_step / state.total_timesteps)
        metrics = seeds.algo.update(batch, progress_remaining=progress_remaining)
        t2 = time.perf_counter()
        rewards, values = (per_seed_columns(x, len(seeds.ctxs)) for x in (buf.rewards, buf.values))
        for k, (ctx, m) in enumerate(zip(seeds.ctxs, metrics, strict=True)):
            ctx.state.metrics = m
            ctx.state.iteration += 1
            ctx.timer.add("env", env_seconds)  # the batch's times: every seed shares them
            ctx.timer.add("act", t1 - t0 - env_seconds)
            ctx.timer.add("update", t2 - t1)
            m.update({"rollout/mean_reward": float(rewards[k].mean()),
                      "rollout/mean_value": float(values[k].mean())})
        seeds.fire("post_update")
        # ---- each seed logs, evaluates and checkpoints; a failed seed leaves the batch -----
        seeds.end_iteration()


def collect(seeds: SeedBatch, buf: RolloutBuffer, steps: int) -> float:
    """`steps` vector steps of every seed into `buf` (seed k's envs are its columns k*N...);
    returns the seconds spent in the envs."""
    env_seconds = 0.0
    starts = episode_starts(seeds)  # () for policies without memory
    for _ in range(steps):
        masks = stacked_masks(seeds)  # None unless the env says which actions are valid
        obs = torch.stack([c.obs for c in seeds.ctxs])
        action, log_prob, value = seeds.algo.act(obs, masks, *starts)
        te = time.perf_counter()
        results = seeds.step_envs(action)
        env_seconds += time.perf_counter() - te
        truncated = torch.cat([r.truncated for r in results])
        buf.add(obs.flatten(0, 1), action.flatten(0, 1), log_prob.flatten(0, 1),
                value.flatten(0, 1), torch.cat([r.reward for r in results]),
                torch.cat([r.terminated for r in results]), truncated,
                None if masks is None else masks.flatten(0, 1))
        if truncated.any():  # time limits: bootstrap from V(final obs), not from 0
            # (with memory: every row, from the state after this step, as a single run does)
            final_values = seeds.algo.value(torch.stack([r.final_obs for r in results]))
            buf.truncated_values[buf.step - 1, truncated] = final_values.flatten()[truncated]
        for ctx, res in zip(seeds.ctxs, results, strict=True):
            ctx.episodes.record(res)
            ctx.obs = res.obs
            ctx.state.global_step += ctx.env.spec.num_envs
            if starts:  # the rows whose next observation begins an episode (checkpoints keep it)
                ctx.episode_starts = res.terminated | res.truncated
        starts = episode_starts(seeds)
    return env_seconds


def episode_starts(seeds: SeedBatch) -> tuple[torch.Tensor, ...]:
    """`(starts,)`, `[S, N]`: the rows whose current observation begins an episode (all of
    them before a seed's first step), for members with memory; `()` for the others."""
    if not getattr(seeds.algo, "recurrent", False):
        return ()
    return (torch.stack([c.episode_starts if c.episode_starts is not None else
                         torch.ones(c.env.spec.num_envs, dtype=torch.bool, device=c.device)
                         for c in seeds.ctxs]),)


def stacked_masks(seeds: SeedBatch) -> torch.Tensor | None:
    """Every seed's valid actions at its current observations `[S, N, n]`, or None (an
    unmasked env: the seeds all run the same env)."""
    masks = [action_mask(c.env) for c in seeds.ctxs]
    return None if masks[0] is None else torch.stack(masks)


def per_seed_columns(x: torch.Tensor, seeds: int) -> torch.Tensor:
    """`[T, S*N, ...]` storage as `[S, T, N, ...]` (seed k's columns, as its own buffer's)."""
    return x.unflatten(1, (seeds, -1)).transpose(0, 1).contiguous()


def per_seed(batch: RolloutBatch, steps: int, seeds: int) -> RolloutBatch:
    """The buffer's flattened `[T*S*N, ...]` batch as `[S, T*N, ...]`: row t*N + i of seed k is
    what seed k's own buffer would flatten to row t*N + i."""
    def split(x: torch.Tensor | None) -> torch.Tensor | None:
        if x is None:
            return None
        return per_seed_columns(x.unflatten(0, (steps, -1)), seeds).flatten(1, 2)

    return RolloutBatch(*(split(x) for x in batch))
