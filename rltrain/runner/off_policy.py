"""The off-policy loop (DQN, DDPG, TD3, SAC): act, store in replay, take gradient steps."""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from rltrain.algos.base import mean_metrics
from rltrain.algos.configs.base import OffPolicyConfig
from rltrain.buffers.choice import replay_class, resolved
from rltrain.buffers.replay import obs_storage_dtype
from rltrain.envs.masks import action_mask
from rltrain.runner.context import LoopContext
from rltrain.types import EnvSpec

log = logging.getLogger("rltrain")


def random_actions(spec: EnvSpec, device: torch.device,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform random actions for every env: indices for Discrete (among the valid ones when
    `mask` [N, n] is given), [-1, 1] for Box."""
    if mask is not None:
        return torch.multinomial(mask.float(), 1).squeeze(-1)
    if spec.action_kind == "discrete":
        return torch.randint(0, spec.action_dim, (spec.num_envs,), device=device)
    return torch.rand((spec.num_envs, spec.action_dim), device=device) * 2.0 - 1.0


def next_state_mask(current: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """The valid actions at each transition's next observation: the env's `current` mask
    (after the step), all True for rows that just ended (theirs is already the next episode's)."""
    return current | done.unsqueeze(-1)


def make_replay(spec: EnvSpec, cfg: OffPolicyConfig, device: torch.device,
                obs_dtype: torch.dtype | dict[str, torch.dtype] | None = None) -> Any:
    """The empty replay `cfg.replay` names (`buffers/choice.py`), built by its class for the env
    `spec` on `device`, with its memory said. `obs_dtype`: the env's observation dtype (default:
    uint8 for `spec.pixels`, else float32), per entry for Dict observations."""
    plain = obs_dtype if obs_dtype is not None and not isinstance(obs_dtype, dict) else (
        torch.uint8 if spec.pixels else torch.float32)
    name = resolved(spec, cfg, obs_storage_dtype(plain) == torch.uint8)
    replay = replay_class(cfg.replay_path(name)).build(spec, cfg, device, obs_dtype)
    log.info("replay buffer: %s transitions, %.1f MiB on %s", f"{replay.capacity:,}",
             replay.nbytes / 2**20, device)
    return replay


def run_off_policy(ctx: LoopContext) -> None:
    """Train until the step budget is spent or `state.stop` is set (`ctx.replay` must be set)."""
    cfg, env, algo, state, replay = ctx.cfg, ctx.env, ctx.algo, ctx.state, ctx.replay
    assert replay is not None, "the off-policy loop needs ctx.replay"
    n = env.spec.num_envs
    after: torch.Tensor | None = None  # the env's mask after the last step (masked envs)
    while state.global_step < state.total_timesteps and not state.stop:
        ctx.fire("pre_iteration")
        # ---- one vector-env step: random before learning_starts, then the policy -------------
        ctx.fire("pre_rollout")
        t0 = time.perf_counter()
        # None unless the env says which actions are valid; read once per step: the mask after
        # a step is both the transition's next-state mask and the next step's acting mask
        mask = action_mask(env) if after is None else after
        if state.global_step < cfg.learning_starts:
            action = random_actions(env.spec, ctx.device, mask)
        elif mask is None:
            action = algo.act(ctx.obs, state.global_step)
        else:
            action = algo.act(ctx.obs, state.global_step, action_mask=mask)
        te = time.perf_counter()
        res = env.step(action)
        env_seconds = time.perf_counter() - te
        if mask is None:
            replay.add(ctx.obs, action, res.reward, res.final_obs, res.terminated)
        else:
            after = action_mask(env)
            replay.add(ctx.obs, action, res.reward, res.final_obs, res.terminated,
                       next_mask=next_state_mask(after, res.terminated | res.truncated))
        ctx.episodes.record(res)
        ctx.obs = res.obs
        state.global_step += n
        ctx.fire("post_rollout")
        # ---- gradient steps every train_freq vector steps -------------------------------------
        t1 = time.perf_counter()
        if state.global_step >= cfg.learning_starts and state.iteration % cfg.train_freq == 0:
            ctx.fire("pre_update")
            rows = [algo.update(replay.sample(cfg.batch_size), state.global_step)
                    for _ in range(cfg.gradient_steps)]
            state.metrics = mean_metrics(rows)
            ctx.fire("post_update")
        state.iteration += 1
        ctx.timer.add("env", env_seconds)
        ctx.timer.add("act", t1 - t0 - env_seconds)  # the policy and the replay storage
        ctx.timer.add("update", time.perf_counter() - t1)
        state.metrics["buffer/size"] = float(replay.size)
        ctx.end_iteration()
