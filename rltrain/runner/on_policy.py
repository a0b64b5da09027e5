"""The on-policy loop (PPO, A2C): collect a rollout, compute GAE, update. Read top to bottom."""

from __future__ import annotations

import logging
import time
from functools import partial

import torch

from rltrain import obs as obs_ops
from rltrain.buffers.replay import obs_storage_dtype
from rltrain.buffers.rollout import RolloutBuffer
from rltrain.envs.masks import action_mask
from rltrain.envs.normalize import merge_statistics
from rltrain.runner.callbacks import LoopState
from rltrain.runner.context import LoopContext
from rltrain.types import action_dtype, action_shape

log = logging.getLogger("rltrain")


def run_on_policy(ctx: LoopContext) -> None:
    """Train until the step budget is spent or `state.stop` is set."""
    cfg, env, algo, state = ctx.cfg, ctx.env, ctx.algo, ctx.state
    spec, n_steps = env.spec, cfg.n_steps
    stored = obs_ops.layout(ctx.obs, obs_storage_dtype)  # (shape, dtype), or per Dict entry
    shape, dtype = (stored, torch.float32) if isinstance(stored, dict) else stored
    make_buffer = partial(RolloutBuffer, num_envs=spec.num_envs, obs_shape=shape,
                          action_shape=action_shape(spec), action_dtype=action_dtype(spec),
                          device=ctx.device, obs_dtype=dtype)
    buf = make_buffer(n_steps)
    per_step = spec.num_envs * ctx.collective.world.size  # env steps of one vector step, all ranks
    log_budget(state, n_steps, per_step)
    obs = ctx.obs
    recurrent = getattr(algo, "recurrent", False)  # a policy with memory needs episode starts
    starts = (ctx.episode_starts if ctx.episode_starts is not None
              else torch.ones(spec.num_envs, dtype=torch.bool, device=ctx.device))
    while state.global_step < state.total_timesteps and not state.stop:
        ctx.fire("pre_iteration")
        steps = rollout_steps(state, n_steps, per_step)
        if steps != buf.n_steps:  # the last rollout, shortened to end on the budget
            buf = make_buffer(steps)
        # ---- collect one rollout --------------------------------------------------------
        ctx.fire("pre_rollout")
        t0, env_seconds = time.perf_counter(), 0.0
        for _ in range(steps):
            mask = action_mask(env)  # None unless the env says which actions are valid
            action, log_prob, value = algo.act(obs, **act_inputs(mask, starts if recurrent else None))
            te = time.perf_counter()
            res = env.step(action)
            env_seconds += time.perf_counter() - te
            buf.add(obs, action, log_prob, value, res.reward, res.terminated, res.truncated, mask)
            if res.truncated.any():  # time limit: bootstrap from V(final obs), not from 0
                rows = res.truncated  # (with memory: every row, from the state after this step)
                buf.truncated_values[buf.step - 1, rows] = (algo.value(res.final_obs)[rows]
                    if recurrent else algo.value(obs_ops.take(res.final_obs, rows)))
            ctx.episodes.record(res)
            obs, starts = res.obs, res.terminated | res.truncated
            state.global_step += per_step
        ctx.obs, ctx.episode_starts = obs, starts
        merge_statistics(env, ctx.collective)  # torchrun: every rank normalizes alike
        ctx.fire("post_rollout")
        # ---- advantages and update ------------------------------------------------------
        t1 = time.perf_counter()
        last_value = algo.value(obs, episode_starts=starts) if recurrent else algo.value(obs)
        batch = buf.finish(last_value, cfg.gamma, cfg.gae_lambda)
        ctx.fire("pre_update")
        progress_remaining = max(0.0, 1.0 - state.global_step / state.total_timesteps)
        state.metrics = algo.update(batch, progress_remaining=progress_remaining)
        state.iteration += 1
        ctx.fire("post_update")
        # ---- log, evaluate, checkpoint --------------------------------------------------
        ctx.timer.add("env", env_seconds)
        ctx.timer.add("act", t1 - t0 - env_seconds)  # the policy and the rollout storage
        ctx.timer.add("update", time.perf_counter() - t1)
        state.metrics.update({
            "rollout/mean_reward": float(buf.rewards.mean()),
            "rollout/mean_value": float(buf.values.mean()),
        })
        state.metrics = ctx.collective.mean_metrics(state.metrics)  # torchrun: over all ranks
        ctx.end_iteration()


def act_inputs(mask: torch.Tensor | None, starts: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The optional inputs of `algo.act`: only those this env and algorithm need, so an
    algorithm without masks or memory keeps the plain `act(obs)`."""
    inputs = {}
    if mask is not None:
        inputs["action_mask"] = mask
    if starts is not None:
        inputs["episode_starts"] = starts
    return inputs


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
