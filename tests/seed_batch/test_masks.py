"""Invalid-action masks in a seed batch: PPO, A2C and DQN act, store and learn with each seed's
own mask, as its single run does.

The env (tests/envs/masked_envs.py) raises on any invalid action (2 of 8 actions are valid at
each step), so a batch that finishes never took one; each seed also matches its single run
metric by metric, which it could not if a mask were dropped anywhere (acting, the rollout's
log-probabilities and entropy, DQN's next-state argmax).
"""

from __future__ import annotations

import pytest

from rltrain.config.compose import compose_train_config
from tests.seed_batch.helpers import assert_batch_matches_single_runs

pytestmark = pytest.mark.orders

_ALGO = {
    "ppo": (["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=2"], 4 * 16 * 2, 4),
    "a2c": (["algo.n_steps=5"], 12 * 5 * 2, 12),
    # 64 random steps, then 4 gradient steps every 8 vector steps: 6 updates by step 160
    "dqn": (["algo.learning_starts=64", "algo.batch_size=16", "algo.train_freq=8",
             "algo.gradient_steps=4", "algo.target_update_interval=32"], 160, 6),
    "qrdqn": (["algo.learning_starts=64", "algo.batch_size=16", "algo.train_freq=8",
               "algo.gradient_steps=4", "algo.target_update_interval=32",
               "algo.n_quantiles=5"], 160, 6),
}


@pytest.mark.parametrize("env_class", ["PickTarget", "PickTargetInfo"])
@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn", "qrdqn"])
def test_a_masked_batch_takes_no_invalid_action_and_matches_each_single_run(algo, env_class,
                                                                            tmp_path):
    extra, budget, updates = _ALGO[algo]
    cfg = compose_train_config([
        f"algo={algo}", f"env.id=tests.envs.masked_envs:{env_class}", "env.num_envs=2",
        "algo.hidden_sizes=[16]", "num_seeds=2", "seed=3", f"total_timesteps={budget}",
        "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off",
        "checkpoint.freq=0", *extra])
    assert_batch_matches_single_runs(cfg, tmp_path, updates)
