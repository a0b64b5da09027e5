"""The off-policy loop (DQN, DDPG, TD3, SAC): act, store in replay, take gradient steps.
Read top to bottom.

It trains a batch of runs together (`context.LoopBatch`): a seed batch, or a single run as a
batch of one (`runner/one_run.py`), with one network call for all runs at each env step and one
gradient step for all; the algorithm takes and returns every value per run (`x[k]` is run k's,
`runner/members.py`). Each run keeps its own env, replay (sampled with its own stream),
episode records and loop state.
"""

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
from rltrain.runner.context import LoopBatch
from rltrain.types import EnvSpec, TransitionBatch

log = logging.getLogger("rltrain")


def make_replay(spec: EnvSpec, cfg: OffPolicyConfig, device: torch.device,
                obs_dtype: torch.dtype | dict[str, torch.dtype] | None = None,
                env: Any = None) -> Any:
    """The empty replay `cfg.replay` names (`buffers/choice.py`), built by its class for the env
    `spec` on `device`, with its memory said. `obs_dtype`: the env's observation dtype (default:
    uint8 for `spec.pixels`, else float32), per entry for Dict observations. A replay that
    needs the run's env (HER: its `compute_reward`) declares `bind_env(env)`."""
    plain = obs_dtype if obs_dtype is not None and not isinstance(obs_dtype, dict) else (
        torch.uint8 if spec.pixels else torch.float32)
    name = resolved(spec, cfg, obs_storage_dtype(plain) == torch.uint8)
    replay = replay_class(cfg.replay_path(name)).build(spec, cfg, device, obs_dtype)
    if env is not None and hasattr(replay, "bind_env"):
        replay.bind_env(env)
    log.info("replay buffer: %s transitions, %.1f MiB on %s", f"{replay.capacity:,}",
             replay.nbytes / 2**20, device)
    return replay


def run_off_policy(runs: LoopBatch) -> None:
    """Train every run until the step budget is spent, a stop is asked for, or none is left
    (each run's `ctx.replay` must be set)."""
    lead = runs.ctxs[0]
    assert all(c.replay is not None for c in runs.ctxs), "the off-policy loop needs ctx.replay"
    cfg, n = lead.cfg, lead.env.spec.num_envs
    per_step = n * lead.collective.world.size  # env steps of one vector step, all ranks
    masked = action_mask(lead.env) is not None  # (masks come with Discrete actions: DQN)
    afters: list[torch.Tensor] | None = None  # each run's mask after its last step (masked)
    while runs.ctxs and not runs.finished():
        state = runs.ctxs[0].state  # every run is at the same step
        runs.fire("pre_iteration")
        # ---- one vector-env step of every run: random before learning_starts, then the policy
        runs.fire("pre_rollout")
        t0 = time.perf_counter()
        # the mask after a step is both the transition's next-state mask and the next acting one
        masks = () if not masked else (  # only DQN's calls take it
            afters if afters is not None else [action_mask(c.env) for c in runs.ctxs],)
        if state.global_step < cfg.learning_starts:
            action = runs.algo.random_actions(n, *masks)
        else:
            action = runs.algo.act([c.obs for c in runs.ctxs], state.global_step, *masks)
        te = time.perf_counter()
        results = runs.step_envs(action)
        env_seconds = time.perf_counter() - te
        if masked:
            afters = [action_mask(c.env) for c in runs.ctxs]
        for k, (ctx, res) in enumerate(zip(runs.ctxs, results, strict=True)):
            masked_next = ({} if afters is None else  # (only a masked env's replay takes one)
                           {"next_mask": next_state_mask(afters[k], res.terminated | res.truncated)})
            ctx.replay.add(ctx.obs, action[k], res.reward, res.final_obs, res.terminated,
                           truncated=res.truncated, **masked_next)
            ctx.episodes.record(res)
            ctx.obs = res.obs
            ctx.state.global_step += per_step
        runs.fire("post_rollout")
        # ---- gradient steps every train_freq vector steps, each run on its own replay ----------
        t1 = time.perf_counter()
        if state.global_step >= cfg.learning_starts and state.iteration % cfg.train_freq == 0:
            runs.fire("pre_update")
            rows = [runs.algo.update(sample(runs, cfg.batch_size), state.global_step)
                    for _ in range(cfg.gradient_steps)]
            for k, ctx in enumerate(runs.ctxs):
                ctx.state.metrics = mean_metrics([row[k] for row in rows])
            runs.fire("post_update")
        t2 = time.perf_counter()
        for ctx in runs.ctxs:
            ctx.state.iteration += 1
            ctx.timer.add("env", env_seconds)  # a batch's times: every run shares them
            ctx.timer.add("act", t1 - t0 - env_seconds)  # the policy and the replay storage
            ctx.timer.add("update", t2 - t1)
            ctx.state.metrics["buffer/size"] = float(ctx.replay.size)
        kept = runs.end_iteration()
        if afters is not None:
            afters = [afters[k] for k in kept]


def next_state_mask(current: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """The valid actions at each transition's next observation: the env's `current` mask
    (after the step), all True for rows that just ended (theirs is already the next episode's)."""
    return current | done.unsqueeze(-1)


def sample(runs: LoopBatch, batch_size: int) -> list[TransitionBatch]:
    """One minibatch per run, from its own replay with its own stream."""
    return [c.replay.sample(batch_size, generator=g)
            for c, g in zip(runs.ctxs, runs.generators, strict=True)]
