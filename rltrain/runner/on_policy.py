"""The on-policy loop (PPO, A2C): collect a rollout, compute GAE, update. Read top to bottom."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from rltrain.buffers.rollout import RolloutBuffer

if TYPE_CHECKING:
    from rltrain.runner.runner import Runner


def run_on_policy(runner: Runner) -> None:
    """Train until the step budget is spent or `state.stop` is set."""
    cfg, env, algo, state = runner.cfg, runner.env, runner.algo, runner.state
    spec, n_steps = env.spec, cfg.algo.n_steps
    action_shape = () if spec.action_kind == "discrete" else (spec.action_dim,)
    action_dtype = torch.long if spec.action_kind == "discrete" else torch.float32
    buf = RolloutBuffer(n_steps, spec.num_envs, spec.obs_shape, action_shape, action_dtype,
                        runner.device)
    obs = runner.obs
    while state.global_step < state.total_timesteps and not state.stop:
        runner.fire("pre_iteration")
        # ---- collect one rollout --------------------------------------------------------
        runner.fire("pre_rollout")
        t0 = time.perf_counter()
        for _ in range(n_steps):
            action, log_prob, value = algo.act(obs)
            res = env.step(action)
            buf.add(obs, action, log_prob, value, res.reward, res.terminated, res.truncated)
            if res.truncated.any():  # time limit: bootstrap from V(final obs), not from 0
                rows = res.truncated
                buf.truncated_values[buf.step - 1, rows] = algo.value(res.final_obs[rows])
            runner.episodes.record(res)
            obs = res.obs
            state.global_step += spec.num_envs
        runner.obs = obs
        runner.fire("post_rollout")
        # ---- advantages and update ------------------------------------------------------
        t1 = time.perf_counter()
        batch = buf.finish(algo.value(obs), cfg.algo.gamma, getattr(cfg.algo, "gae_lambda", 1.0))
        runner.fire("pre_update")
        progress_remaining = max(0.0, 1.0 - state.global_step / state.total_timesteps)
        state.metrics = algo.update(batch, progress_remaining=progress_remaining)
        state.iteration += 1
        runner.fire("post_update")
        # ---- log, evaluate, checkpoint --------------------------------------------------
        runner.timer.add("rollout", t1 - t0)
        runner.timer.add("update", time.perf_counter() - t1)
        state.metrics.update({
            "rollout/mean_reward": float(buf.rewards.mean()),
            "rollout/mean_value": float(buf.values.mean()),
        })
        runner.end_iteration()
