"""The on-policy budget: a run takes ceil(total_timesteps / num_envs) * num_envs env steps, the
last rollout shortened to fit, and says so at the start when it is shortened."""

from __future__ import annotations

import logging

import pytest

from rltrain.runner.callbacks import LoopState
from rltrain.runner.on_policy import rollout_steps
from rltrain.runner.runner import Runner


def run_recording_batches(cfg, tmp_path) -> tuple[Runner, list[int], list[dict]]:
    """Train `cfg`; returns the runner, the rows of each update's batch and each update's metrics."""
    runner = Runner(cfg, tmp_path)
    rows, metrics, update = [], [], runner.algo.update

    def recording_update(batch, progress_remaining=1.0):
        rows.append(batch.obs.shape[0])
        metrics.append(update(batch, progress_remaining))
        return metrics[-1]

    runner.algo.update = recording_update
    runner.run()
    return runner, rows, metrics


def test_budget_smaller_than_one_rollout_takes_exactly_the_budget(tmp_path, tiny_cfg, caplog):
    # 8 envs x n_steps 2048 is a 16,384-step rollout: total_timesteps=4096 used to take all of it
    cfg = tiny_cfg(total_timesteps=4096, env={"num_envs": 8},
                   algo={"n_steps": 2048, "batch_size": 512, "n_epochs": 1})
    with caplog.at_level(logging.INFO, logger="rltrain"):
        runner, rows, metrics = run_recording_batches(cfg, tmp_path)
    assert runner.state.global_step == 4096
    assert rows == [4096]  # one rollout of 512 steps per env
    assert metrics[0]["train/n_updates"] == 8.0  # 4096 / 512 minibatches
    assert "the last rollout is shortened to 512 steps per env; 4,096 env steps in all" in caplog.text


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_budget_that_is_no_multiple_of_the_rollout_shortens_the_last_one(tmp_path, tiny_cfg, algo):
    from rltrain.algos.configs.a2c import A2CConfig

    cfg = tiny_cfg(total_timesteps=100)  # 2 envs x 16 steps: 50 steps per env = 16 + 16 + 16 + 2
    if algo == "a2c":
        cfg.algo = A2CConfig(n_steps=16, hidden_sizes=[16, 16])
    runner, rows, metrics = run_recording_batches(cfg, tmp_path)
    assert runner.state.global_step == 100
    assert rows == [32, 32, 32, 4]
    if algo == "ppo":  # batch_size 16, 2 epochs: the last rollout is one minibatch of 4 per epoch
        assert [m["train/n_updates"] for m in metrics] == [4.0, 4.0, 4.0, 2.0]


def test_budget_that_is_no_multiple_of_num_envs_overshoots_by_less_than_num_envs(
        tmp_path, tiny_cfg, caplog):
    cfg = tiny_cfg(total_timesteps=33, env={"num_envs": 4}, algo={"n_steps": 4, "batch_size": 4})
    with caplog.at_level(logging.INFO, logger="rltrain"):
        runner, rows, _ = run_recording_batches(cfg, tmp_path)
    assert runner.state.global_step == 36  # ceil(33 / 4) * 4: every env steps each time
    assert rows == [16, 16, 4]
    assert "36 env steps in all (3 past total_timesteps" in caplog.text


def test_budget_that_is_a_multiple_of_the_rollout_says_nothing(tmp_path, tiny_cfg, caplog):
    with caplog.at_level(logging.INFO, logger="rltrain"):
        runner, rows, _ = run_recording_batches(tiny_cfg(total_timesteps=64), tmp_path)
    assert runner.state.global_step == 64 and rows == [32, 32]
    assert "shortened" not in caplog.text


@pytest.mark.parametrize(("total", "step", "expected"), [
    (4096, 0, 512), (16384, 0, 2048), (16385, 16384, 1), (16391, 16384, 1), (16392, 16384, 1),
    (16393, 16384, 2)])
def test_rollout_steps_per_env_never_exceed_n_steps_or_the_budget(total, step, expected):
    state = LoopState(total_timesteps=total)
    state.global_step = step
    assert rollout_steps(state, 2048, 8) == expected
