"""Agents learn, in seconds: PPO and DQN solve a 4-cell corridor on every seed tried.

The longer learning checks (CartPole, Pendulum, the tuned presets) are `slow` and run from
`make test-all` / `make bench-quality`; these keep one learning threshold per family in CI.
The corridor's best return is fixed: 3 steps of -0.1 then +1 at the goal, 0.7 in all.
"""

from __future__ import annotations

import pytest

from rltrain.api import train
from tests.envs.my_envs import GOAL_REWARD, STEP_COST

BEST = 3 * STEP_COST + GOAL_REWARD
CORRIDOR = ["env.id=tests.envs.my_envs:make_corridor", "env.num_envs=4", "env.max_episode_steps=20",
            "logger=none", "progress=off", "eval.freq=0", "eval.episodes=4", "eval.num_envs=4",
            "checkpoint.freq=0", "algo.hidden_sizes=[16]"]
ALGOS = {
    "ppo": ["algo=ppo", "algo.n_steps=32", "algo.batch_size=64", "total_timesteps=1024"],
    "dqn": ["algo=dqn", "algo.learning_starts=200", "algo.batch_size=32", "algo.lr=1e-3",
            "algo.exploration_steps=1500", "total_timesteps=3000"],
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_agent_finds_the_shortest_way_down_the_corridor(algo, seed, tmp_path):
    result = train([*CORRIDOR, *ALGOS[algo], f"seed={seed}"], run_dir=tmp_path)
    # an initial policy walks left forever (-2.0) on about half the seeds, and DQN with 2,000
    # steps still did on seeds 1 and 2: the threshold is not met by chance
    assert result["mean_reward"] == pytest.approx(BEST), result["returns"]
