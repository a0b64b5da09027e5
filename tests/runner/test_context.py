"""The loops run over a LoopContext alone: no Runner, only the pieces and hooks they are given."""

from __future__ import annotations

import torch

from rltrain.algos import dqn, ppo
from rltrain.config.schema import EnvConfig
from rltrain.envs.make import make_env
from rltrain.runner.callbacks import LoopState
from rltrain.runner.context import LoopContext
from rltrain.runner.episode_stats import EpisodeTracker
from rltrain.runner.off_policy import make_replay, run_off_policy
from rltrain.runner.on_policy import run_on_policy
from rltrain.runner.one_run import OneRun
from rltrain.runner.timing import SectionTimer


def context(algo_cfg, build, total: int, events: list[str], ends: list[int]) -> LoopContext:
    """A LoopContext on 2 CartPole envs whose hooks record the events and iteration ends."""
    torch.manual_seed(0)
    env = make_env(EnvConfig(id="CartPole-v1", num_envs=2), torch.device("cpu"))
    state = LoopState(total_timesteps=total)
    return LoopContext(env, build(algo_cfg, env.spec), algo_cfg, state, EpisodeTracker(),
                       SectionTimer(), torch.device("cpu"), obs=env.reset(seed=0),
                       fire=events.append, end_iteration=lambda: ends.append(state.global_step))


def test_on_policy_loop_advances_the_context_and_calls_its_hooks():
    events, ends = [], []
    cfg = ppo.PPOConfig(n_steps=8, batch_size=16, n_epochs=1, hidden_sizes=[16])
    ctx = context(cfg, ppo.build, 48, events, ends)
    first_obs = ctx.obs
    run_on_policy(OneRun(ctx))
    assert ends == [16, 32, 48] and ctx.state.iteration == 3
    assert events[:5] == ["pre_iteration", "pre_rollout", "post_rollout", "pre_update", "post_update"]
    assert not torch.equal(ctx.obs, first_obs)  # the context holds the latest observation
    assert "train/policy_loss" in ctx.state.metrics and ctx.timer.totals["env"] > 0 and ctx.timer.totals["act"] > 0


def test_off_policy_loop_fills_the_replay_buffer_it_is_given():
    events, ends = [], []
    cfg = dqn.DQNConfig(buffer_size=100, learning_starts=8, batch_size=4, hidden_sizes=[16])
    ctx = context(cfg, dqn.build, 20, events, ends)
    ctx.replay = make_replay(ctx.env.spec, cfg, ctx.device)
    run_off_policy(OneRun(ctx))
    assert ends == list(range(2, 22, 2)) and ctx.replay.size == 20
    assert ctx.state.metrics["buffer/size"] == 20.0 and "pre_update" in events
