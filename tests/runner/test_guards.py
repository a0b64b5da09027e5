"""Numerical guards: non-finite metrics or weights stop training with one line, and no checkpoint
with a NaN is ever written (the last good one stays on disk)."""

from __future__ import annotations

import math

import pytest
import torch

from rltrain.algos.configs.dqn import DQNConfig
from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import CheckpointConfig, EnvConfig, EvalConfig, LoggerConfig, TrainConfig
from rltrain.config.validation import validate
from rltrain.errors import TrainingError
from rltrain.runner.guards import check_metrics, check_parameters
from rltrain.runner.runner import Runner


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_metrics_names_the_non_finite_train_metric_and_the_step(bad):
    metrics = {"train/policy_loss": 0.5, "train/value_loss": bad, "train/entropy": math.nan}
    with pytest.raises(TrainingError) as err:
        check_metrics(metrics, 12_345)
    message = str(err.value)
    assert message.startswith(f"non-finite train/value_loss={bad} at step 12,345; try ")
    assert "algo.lr" in message and "\n" not in message


def test_check_metrics_ignores_finite_and_non_train_metrics():
    check_metrics({"train/policy_loss": -1e30, "eval/mean_reward": math.nan,
                   "episode/mean_reward": math.inf, "time/sps": math.nan}, 7)


def test_check_parameters_names_the_module_and_parameter_and_the_step():
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    check_parameters({"critic": net}, 1)  # finite: no error
    with torch.no_grad():
        net[1].bias[0] = math.inf
    with pytest.raises(TrainingError, match=r"^non-finite parameter critic\.1\.bias at step 2,000;"):
        check_parameters({"actor": torch.nn.Linear(2, 2), "critic": net}, 2000)


def poison_after(runner: Runner, step: int):
    """A `post_update` callback writing NaN into the first weight of the policy from `step` on."""

    def poison(state):
        if state.global_step >= step:
            with torch.no_grad():
                next(runner.algo.policy.parameters()).view(-1)[0] = math.nan

    return poison


def assert_all_finite(tree, where="payload"):
    """Every tensor and float in a nested checkpoint payload is finite."""
    if isinstance(tree, torch.Tensor):
        assert not tree.is_floating_point() or torch.isfinite(tree).all(), where
    elif isinstance(tree, dict):
        for k, v in tree.items():
            assert_all_finite(v, f"{where}.{k}")
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            assert_all_finite(v, f"{where}[{i}]")


def test_poisoned_weights_stop_ppo_before_the_checkpoint_is_written(tmp_path, tiny_cfg):
    # 32 env steps per iteration; a checkpoint is due every iteration
    runner = Runner(tiny_cfg(total_timesteps=256, checkpoint={"freq": 32}), tmp_path)
    runner.add_callback("post_update", poison_after(runner, 64))
    with pytest.raises(TrainingError, match=r"^non-finite parameter policy\.\S+ at step 64;"):
        runner.run()
    latest = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] == 32  # the last good one
    assert_all_finite(latest["algo"])
    assert not (tmp_path / "checkpoints" / "final.pt").exists()
    assert not (tmp_path / "checkpoints" / "step_000000064.pt").exists()


def test_poisoned_weights_stop_dqn_at_the_next_update_through_its_loss(tmp_path):
    cfg = validate(TrainConfig(
        algo=DQNConfig(hidden_sizes=[16], learning_starts=16, batch_size=16, train_freq=1,
                       exploration_steps=100),
        env=EnvConfig(id="CartPole-v1", num_envs=1), progress="off", total_timesteps=200,
        logger=LoggerConfig(tensorboard=False, csv=False), eval=EvalConfig(freq=0, episodes=1),
        checkpoint=CheckpointConfig(freq=32)))
    runner = Runner(cfg, tmp_path)
    runner.add_callback("post_update", poison_after(runner, 40))
    # step 40: the poisoned net is not saved (no checkpoint due); step 41's loss is NaN
    with pytest.raises(TrainingError, match=r"^non-finite train/q_loss=nan at step 41;"):
        runner.run()
    latest = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] == 32
    assert_all_finite(latest["algo"])


def test_diverging_ppo_stops_with_a_training_error(tmp_path, tiny_cfg):
    runner = Runner(tiny_cfg(algo={"lr": 1e30}), tmp_path)  # outside: a UserError is a ValueError
    with pytest.raises(TrainingError, match="non-finite"):
        runner.run()


def test_nan_explained_variance_of_constant_returns_does_not_stop_training():
    from rltrain.runner.guards import check_metrics

    # constant returns make explained variance nan by definition; training must go on
    check_metrics({"train/explained_variance": float("nan"), "train/value_loss": 0.0}, step=10)


def test_a_non_finite_eval_result_never_becomes_best(tmp_path, tiny_cfg, monkeypatch, caplog):
    import rltrain.runner.runner as runner_module
    from rltrain.runner.runner import Runner

    def inf_episodes(*args, **kwargs):
        return {"episodes": 2, "mean_reward": float("inf"), "std_reward": float("nan"),
                "min_reward": float("inf"), "max_reward": float("inf"), "mean_length": 3.0,
                "returns": [float("inf")] * 2, "lengths": [3, 3]}

    monkeypatch.setattr(runner_module, "run_episodes", inf_episodes)
    runner = Runner(tiny_cfg(), tmp_path)
    with caplog.at_level("WARNING", logger="rltrain"):
        result = runner.run()
    assert result["mean_reward"] == float("inf")  # reported as it is
    assert not (tmp_path / "checkpoints" / "best.pt").exists()
    assert runner.state.best_eval == float("-inf")
    assert "non-finite rewards" in caplog.text
