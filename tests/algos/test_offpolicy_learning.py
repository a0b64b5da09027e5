"""Learning checks for DDPG, TD3 and SAC on Pendulum-v1 (a random policy scores about −1200)."""

import pytest

from rltrain.api import train

QUIET = ["logger=none", "progress=off", "checkpoint.freq=0", "eval.freq=0"]


@pytest.mark.slow  # tens of seconds: `make test-all` / `make bench-quality`
def test_sac_learns_pendulum_swing_up_within_4000_steps(tmp_path):
    """About 30 s on one core; seeds 0-2 reached −126 to −179 here; untrained scores ≈ −1600."""
    overrides = ["algo=sac", "env=Pendulum-v1", "seed=0", "total_timesteps=4000", "env.num_envs=1",
                 "algo.hidden_sizes=[64,64]", "algo.lr=1e-3", "algo.learning_starts=500",
                 "eval.episodes=5", *QUIET]
    result = train(overrides, run_dir=tmp_path)
    assert result["mean_reward"] > -600


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "td3", "ddpg"])
def test_tuned_preset_solves_pendulum_in_20k_steps(algo, tmp_path):
    """The tuned preset's final 10-episode deterministic eval reaches −200 (2-4 min each)."""
    result = train([f"algo={algo}", "env=Pendulum-v1", "seed=0", *QUIET], run_dir=tmp_path)
    assert result["episodes"] == 10
    assert result["mean_reward"] >= -200
