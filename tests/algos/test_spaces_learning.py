"""Learning checks on categorical and Dict observations and multi-dimensional actions (slow:
`make bench-quality`): FrozenLake (Discrete observations) solved by PPO and DQN; a Dict task
whose right action needs both entries, by PPO, DQN and SAC; and a MultiDiscrete action task
where each dimension has its own right answer, by PPO."""

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


CUE_TASK = ["env.id=tests.envs.dict_envs:CueTask", "progress=off", "logger=none",
            "checkpoint.freq=0", "eval.episodes=10"]


@pytest.mark.slow  # ~10 s (PPO), ~15 s (DQN), ~60 s (SAC) per seed on 2 cores
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("algo, settings, floor", [
    # 8 steps per episode; a random policy earns 2 (Box: about -7), one entry alone at most 4
    ("ppo", ["env.num_envs=4", "algo.n_steps=128", "algo.batch_size=256",
             "total_timesteps=30000"], 7.0),
    ("dqn", ["total_timesteps=20000", "algo.learning_starts=1000", "algo.train_freq=4",
             "algo.exploration_steps=10000"], 7.0),
    ("sac", ["+env.kwargs.box=true", "total_timesteps=10000", "algo.learning_starts=1000"], -0.5),
])
def test_a_dict_task_that_needs_both_entries_is_solved(algo, settings, floor, seed, tmp_path):
    """`tests/envs/dict_envs.py`: the answer is 2 * cue + (pos[0] > 0), cue and pos being two
    entries of a Dict observation encoded separately (one-hot and flatten)."""
    result = api.train([f"algo={algo}", f"seed={seed}", *CUE_TASK, *settings], run_dir=tmp_path)
    assert result["mean_reward"] >= floor, result["returns"]
