"""Observations far outside their declared Box bounds (issue 44): one warning line per run,
naming the env, the dimension, the value and the bound; round-off and overshoots within the
space's width stay silent; after the first steps only one step in `EVERY` is checked."""

from __future__ import annotations

import logging

import gymnasium as gym
import pytest
import torch

from rltrain.envs import obs_bounds
from rltrain.envs.vec_env import GymVecEnv
from tests.e2e.harness import run_cli
from tests.envs.bounds_envs import OffBounds

ENV = "tests.envs.bounds_envs:make_off_bounds"


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(obs_bounds, "_warned", set())  # once per process: each test its own


def far_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "far outside" in line]


def venv(value: float, n: int = 2) -> GymVecEnv:
    return GymVecEnv(gym.vector.SyncVectorEnv([lambda: OffBounds(value)] * n,
                                              autoreset_mode=gym.vector.AutoresetMode.SAME_STEP),
                     name="off")


def test_far_out_observations_warn_once_naming_env_dim_value_and_bound(caplog):
    env = venv(10.0)
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        env.reset(seed=0)
        for _ in range(40):  # episodes end and reset: still one line
            env.step(torch.zeros(2, dtype=torch.long))
        venv(10.0).reset(seed=1)  # another env of the same run (its evaluation env)
    lines = far_lines(caplog.text)
    assert len(lines) == 1, caplog.text
    assert "env off: observation dim 1 is far outside" in lines[0]
    assert "dim 1 = 10 (row 0), above high=1" in lines[0] and "observation_space is wrong" in lines[0]


@pytest.mark.parametrize("value", [1.0, 2.9, -2.9])
def test_overshoots_within_the_width_of_the_space_do_not_warn(value, caplog):
    env = venv(value)  # dim 0 is 1.0001 throughout: round-off
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        env.reset(seed=0)
        for _ in range(20):
            env.step(torch.zeros(2, dtype=torch.long))
    assert not far_lines(caplog.text)


def test_after_the_first_steps_one_step_in_every_is_checked(monkeypatch):
    monkeypatch.setattr(obs_bounds, "EVERY_STEP_FOR", 3)
    monkeypatch.setattr(obs_bounds, "EVERY", 5)
    watch = obs_bounds.BoundsWatch(venv(0.0).leaves, "off")
    checked = []
    monkeypatch.setattr(watch, "_check", lambda arrays: checked.append(watch.steps))
    watch.reset([None])
    for _ in range(12):
        watch.step([None])
    assert checked == [0, 1, 2, 3, 5, 10]


def test_a_training_run_warns_once_on_the_console(tmp_path, monkeypatch, capfd):
    result = run_cli([f"env.id={ENV}", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
                      "algo.n_epochs=1", "algo.hidden_sizes=[16]", "total_timesteps=64",
                      "eval.freq=32", "eval.episodes=2", "logger=none", "progress=off",
                      "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    lines = far_lines(result.out + result.err)
    assert len(lines) == 1 and f"env {ENV}: observation dim 1" in lines[0], result.describe()
