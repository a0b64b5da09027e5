"""Learning checks on CartPole-v1: short seeded runs for CI, the tuned presets under `slow`.

A uniformly random CartPole policy scores about 22; the short runs must clearly beat it, which an
update with a wrong target, sign or mask does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rltrain.api import train

QUIET = ["env=CartPole-v1", "logger=none", "progress=off", "checkpoint.freq=0", "eval.freq=0"]


def train_cartpole(run_dir: Path, *overrides: str) -> float:
    """Final 10-episode deterministic eval mean of a seeded CartPole-v1 run."""
    return train([*QUIET, "seed=0", *overrides], run_dir=run_dir)["mean_reward"]


@pytest.mark.slow  # tens of seconds: `make test-all` / `make bench-quality`
def test_dqn_clearly_beats_random_on_cartpole_in_12k_steps(tmp_path):
    mean = train_cartpole(
        tmp_path, "algo=dqn", "total_timesteps=12000", "algo.hidden_sizes=[64,64]",
        "algo.train_freq=64", "algo.gradient_steps=32", "algo.exploration_steps=4000")
    assert mean > 100  # seed 0 scores 500; seeds 1-4 scored 100-500


@pytest.mark.slow  # tens of seconds: `make test-all` / `make bench-quality`
def test_a2c_clearly_beats_random_on_cartpole_in_40k_steps(tmp_path):
    mean = train_cartpole(tmp_path, "algo=a2c", "total_timesteps=40000")
    assert mean > 150  # seeds 0-4 scored 266-500


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dqn", "a2c"])
def test_tuned_preset_solves_cartpole(tmp_path, algo):
    assert train_cartpole(tmp_path, f"algo={algo}") >= 475
