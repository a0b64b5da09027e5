"""Learning checks on categorical observations and multi-dimensional actions (slow: `make
bench-quality`): FrozenLake (Discrete observations) solved by PPO and DQN, and a MultiDiscrete
action task where each dimension has its own right answer, by PPO."""

from __future__ import annotations

import pytest

from rltrain import api

FROZEN_LAKE = ["env=FrozenLake-v1", "+env.kwargs.is_slippery=false", "progress=off",
               "logger=none", "checkpoint.freq=0", "eval.episodes=10", "total_timesteps=20000"]


@pytest.mark.slow  # ~15 s (PPO), ~45 s (DQN); seeds 0-2 all reached 1.0 when this was written
@pytest.mark.parametrize("algo, settings", [
    ("ppo", ["algo.n_steps=128", "algo.batch_size=256", "algo.ent_coef=0.01"]),
    ("dqn", ["algo.learning_starts=1000", "algo.train_freq=4", "algo.exploration_steps=10000",
             "algo.target_update_interval=500"]),
])
def test_frozen_lake_without_slipping_is_solved(algo, settings, tmp_path):
    result = api.train([f"algo={algo}", "seed=0", *FROZEN_LAKE, *settings], run_dir=tmp_path)
    assert result["mean_reward"] == 1.0, result["returns"]  # every deterministic episode


@pytest.mark.slow  # ~20 s
def test_ppo_learns_each_dimension_of_a_multi_discrete_action(tmp_path):
    """Three dimensions of three choices, each with its own target shown in the observation:
    random play earns 1/3 a step, the right answer 1 (8 steps: return 8)."""
    result = api.train(["algo=ppo", "env.id=tests.envs.space_envs:MultiDiscreteAction", "seed=0",
                        "total_timesteps=20000", "algo.n_steps=64", "algo.batch_size=256",
                        "progress=off", "logger=none", "checkpoint.freq=0", "eval.episodes=10"],
                       run_dir=tmp_path)
    assert result["mean_reward"] >= 7.5, result["returns"]
