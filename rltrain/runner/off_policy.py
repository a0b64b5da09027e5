"""The off-policy loop (DQN, DDPG, TD3, SAC): act, store in replay, take gradient steps."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import torch

from rltrain.algos.base import mean_metrics
from rltrain.buffers.replay import ReplayBuffer
from rltrain.types import EnvSpec

if TYPE_CHECKING:
    from rltrain.runner.runner import Runner

log = logging.getLogger("rltrain")


def random_actions(spec: EnvSpec, device: torch.device) -> torch.Tensor:
    """Uniform random actions for every env: indices for Discrete, [-1, 1] for Box."""
    if spec.action_kind == "discrete":
        return torch.randint(0, spec.action_dim, (spec.num_envs,), device=device)
    return torch.rand((spec.num_envs, spec.action_dim), device=device) * 2.0 - 1.0


def make_replay(runner: Runner) -> ReplayBuffer:
    """The replay buffer the config asks for, with its memory reported."""
    spec, cfg = runner.env.spec, runner.cfg.algo
    discrete = spec.action_kind == "discrete"
    replay = ReplayBuffer(cfg.buffer_size, spec.obs_shape, () if discrete else (spec.action_dim,),
                          torch.long if discrete else torch.float32, runner.device)
    log.info("replay buffer: %s transitions, %.1f MB on %s", f"{replay.capacity:,}",
             replay.nbytes / 2**20, runner.device)
    saved = getattr(runner, "replay_state", None)
    if saved is not None:
        replay.load_state_dict(saved)
        log.info("replay buffer restored: %s transitions", f"{replay.size:,}")
    elif runner.state.global_step > 0:
        log.info("replay buffer starts empty (checkpoint.save_buffer=false): resume is not bit-for-bit")
    return replay


def run_off_policy(runner: Runner) -> None:
    """Train until the step budget is spent or `state.stop` is set."""
    cfg, env, algo, state = runner.cfg.algo, runner.env, runner.algo, runner.state
    replay = runner.replay = getattr(runner, "replay", None) or make_replay(runner)
    obs, n = runner.obs, env.spec.num_envs
    while state.global_step < state.total_timesteps and not state.stop:
        runner.fire("pre_iteration")
        # ---- one vector-env step: random before learning_starts, then the policy -------------
        runner.fire("pre_rollout")
        t0 = time.perf_counter()
        if state.global_step < cfg.learning_starts:
            action = random_actions(env.spec, runner.device)
        else:
            action = algo.act(obs, state.global_step)
        res = env.step(action)
        replay.add(obs, action, res.reward, res.final_obs, res.terminated)
        runner.episodes.record(res)
        obs = runner.obs = res.obs
        state.global_step += n
        runner.fire("post_rollout")
        # ---- gradient steps every train_freq vector steps -------------------------------------
        t1 = time.perf_counter()
        if state.global_step >= cfg.learning_starts and state.iteration % cfg.train_freq == 0:
            runner.fire("pre_update")
            rows = [algo.update(replay.sample(cfg.batch_size), state.global_step)
                    for _ in range(cfg.gradient_steps)]
            state.metrics = mean_metrics(rows)
            runner.fire("post_update")
        state.iteration += 1
        runner.timer.add("rollout", t1 - t0)
        runner.timer.add("update", time.perf_counter() - t1)
        state.metrics["buffer/size"] = float(replay.size)
        runner.end_iteration()
