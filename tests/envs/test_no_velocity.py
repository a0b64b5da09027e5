"""The velocity-masked classic-control ids: registered when named, velocities zeroed, positions
kept, and usable by name from the command line like any gymnasium id."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltrain.envs.families import register_on_demand
from rltrain.envs.no_velocity import NO_VELOCITY
from tests.e2e.harness import run_cli


@pytest.mark.parametrize("env_id", sorted(NO_VELOCITY))
def test_velocity_entries_are_zero_and_the_others_follow_the_base_env(env_id):
    base_id, indices = NO_VELOCITY[env_id]
    register_on_demand(env_id)
    masked, base = gym.make(env_id), gym.make(base_id)
    assert masked.observation_space.shape == base.observation_space.shape
    assert not np.isnan(masked.observation_space.low).any()
    obs, _ = masked.reset(seed=3)
    ref, _ = base.reset(seed=3)
    kept = [i for i in range(len(ref)) if i not in indices]
    for _ in range(20):  # same seed, same actions: the kept entries equal the base env's
        action = masked.action_space.sample()
        obs, *_ = masked.step(action)
        ref, *_ = base.step(action)
        assert np.all(obs[list(indices)] == 0)
        np.testing.assert_array_equal(obs[kept], ref[kept])
    assert np.any(ref[list(indices)] != 0), "the base env's velocities never moved"
    assert masked.spec.id == env_id


def test_an_unknown_id_is_left_alone():
    register_on_demand("NoSuchNoVel-v0")
    assert "NoSuchNoVel-v0" not in gym.registry


def test_a_no_velocity_id_trains_and_evaluates_by_name(tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    result = run_cli(["algo=ppo", "env=CartPoleNoVel-v1", "total_timesteps=64", "env.num_envs=2",
                      "algo.n_steps=16", "algo.batch_size=16", "algo.hidden_sizes=[8]",
                      "logger=none", "progress=off", "eval.episodes=1", f"hydra.run.dir={run}"],
                     tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    result = run_cli(["eval", f"ckpt={run / 'checkpoints' / 'final.pt'}", "episodes=2"],
                     tmp_path, monkeypatch, capfd)
    assert result.rc == 0 and "mean" in result.out.lower(), result.describe()
