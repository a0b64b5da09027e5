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
from rltrain.seeds.batch import SeedBatch
from rltrain.types import RolloutBatch, action_dtype, action_shape


def run_seed_batch(seeds: SeedBatch) -> None:
    """Train every seed until the step budget is spent, a stop is asked for, or none is left."""
    lead = seeds.ctxs[0]
    cfg, spec, n_steps = lead.cfg, lead.env.spec, lead.cfg.n_steps
    shape, dtype = obs_ops.layout(lead.obs, obs_storage_dtype)
    make_buffer = partial(RolloutBuffer, num_envs=spec.num_envs, obs_shape=shape,
                          action_shape=action_shape(spec), action_dtype=action_dtype(spec),
                          device=lead.device, obs_dtype=dtype)
    per_step = spec.num_envs
    log_budget(lead.state, n_steps, per_step)
    bufs = [make_buffer(n_steps) for _ in seeds.ctxs]
    while seeds.ctxs and not seeds.finished():
        seeds.fire("pre_iteration")
        state = seeds.ctxs[0].state  # every seed is at the same step
        steps = rollout_steps(state, n_steps, per_step)
        if steps != bufs[0].n_steps:  # the last rollout, shortened to end on the budget
            bufs = [make_buffer(steps) for _ in seeds.ctxs]
        # ---- collect one rollout of every seed -------------------------------------------
        seeds.fire("pre_rollout")
        t0, env_seconds = time.perf_counter(), 0.0
        for _ in range(steps):
            masks = stacked_masks(seeds)  # None unless the env says which actions are valid
            action, log_prob, value = seeds.algo.act(torch.stack([c.obs for c in seeds.ctxs]),
                                                     masks)
            te = time.perf_counter()
            results = [c.env.step(action[k]) for k, c in enumerate(seeds.ctxs)]
            env_seconds += time.perf_counter() - te
            truncated = [bool(r.truncated.any()) for r in results]
            if any(truncated):  # time limits: bootstrap from V(final obs), not from 0
                final_values = seeds.algo.value(torch.stack([r.final_obs for r in results]))
            for k, (ctx, res, buf) in enumerate(zip(seeds.ctxs, results, bufs, strict=True)):
                buf.add(ctx.obs, action[k], log_prob[k], value[k], res.reward, res.terminated,
                        res.truncated, None if masks is None else masks[k])
                if truncated[k]:
                    buf.truncated_values[buf.step - 1, res.truncated] = final_values[k][res.truncated]
                ctx.episodes.record(res)
                ctx.obs = res.obs
                ctx.state.global_step += per_step
        seeds.fire("post_rollout")
        # ---- advantages and one batched update ----------------------------------------------
        t1 = time.perf_counter()
        last_values = seeds.algo.value(torch.stack([c.obs for c in seeds.ctxs]))
        batch = stack_batches([buf.finish(last_values[k], cfg.gamma, cfg.gae_lambda)
                               for k, buf in enumerate(bufs)])
        seeds.fire("pre_update")
        progress_remaining = max(0.0, 1.0 - state.global_step / state.total_timesteps)
        metrics = seeds.algo.update(batch, progress_remaining=progress_remaining)
        t2 = time.perf_counter()
        for ctx, buf, m in zip(seeds.ctxs, bufs, metrics, strict=True):
            ctx.state.metrics = m
            ctx.state.iteration += 1
            ctx.timer.add("env", env_seconds)  # the batch's times: every seed shares them
            ctx.timer.add("act", t1 - t0 - env_seconds)
            ctx.timer.add("update", t2 - t1)
            m.update({"rollout/mean_reward": float(buf.rewards.mean()),
                      "rollout/mean_value": float(buf.values.mean())})
        seeds.fire("post_update")
        # ---- each seed logs, evaluates and checkpoints; a failed seed leaves the batch -----
        kept = seeds.end_iteration()
        bufs = [bufs[k] for k in kept]


def stacked_masks(seeds: SeedBatch) -> torch.Tensor | None:
    """Every seed's valid actions at its current observations `[S, N, n]`, or None (an
    unmasked env: the seeds all run the same env)."""
    masks = [action_mask(c.env) for c in seeds.ctxs]
    return None if masks[0] is None else torch.stack(masks)


def stack_batches(batches: list[RolloutBatch]) -> RolloutBatch:
    """The seeds' rollouts as one batch with a leading seed dimension `[S, B, ...]`."""
    return RolloutBatch(*(torch.stack(parts) if parts[0] is not None else None
                          for parts in zip(*batches, strict=True)))
