"""Env extras: reward components and `log` scalars reach TensorBoard and metrics.csv exactly."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.config.schema import CheckpointConfig, EnvConfig, EvalConfig, LoggerConfig, TrainConfig
from rltrain.config.validation import validate
from rltrain.envs.extras import vector_extras
from rltrain.runner.episode_stats import EpisodeTracker
from rltrain.runner.runner import Runner
from rltrain.types import StepResult

ENV_ID = "rltrain_test/Components-v0"
N_STEPS = 5  # vector steps per PPO rollout, so one log period = 5 vector steps (log_freq=0)
TOTAL = 200  # env steps = 2 envs * 5 steps * 20 iterations


class ComponentsEnv(gym.Env):
    """Env k (seeded with seed+k) lasts 3 + 2k steps; step t reports components a=1, b=2t, a
    `log` scalar speed=t, and top-level infos: pos=10t, a 8x8 frame and a string. The reset
    info (pos=-1000, spawn=7) must never be logged: it is not a step of any episode."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode: str | None = None):
        self.render_mode, self.length, self.t = render_mode, 3, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.length = 3 + 2 * (seed % 2)
        self.t = 0
        return np.zeros(1, np.float32), {"pos": -1000.0, "spawn": 7.0}

    def step(self, action):
        self.t += 1
        info = {"reward_components": {"a": 1.0, "b": 2.0 * self.t}, "log": {"speed": float(self.t)},
                "pos": 10.0 * self.t, "frame": np.zeros((8, 8)), "name": "x"}
        obs = np.array([float(self.t)], np.float32)
        return obs, 1.0 + 2.0 * self.t, self.t >= self.length, False, info


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=ComponentsEnv)


def expected_by_period(periods: int) -> dict[str, list[float]]:
    """Reference values per log period, computed independently of the tracker."""
    lengths = (3, 5)  # env 0 and env 1 (seed 0)
    out: dict[str, list[float]] = defaultdict(list)
    for p in range(periods):
        a_sums, b_sums, speeds = [], [], []
        for length in lengths:
            for s in range(p * N_STEPS + 1, (p + 1) * N_STEPS + 1):  # vector steps of the period
                t = (s - 1) % length + 1
                speeds.append(t)
                if t == length:  # an episode ended at this step
                    a_sums.append(length)
                    b_sums.append(length * (length + 1))
        out["reward/a"].append(sum(a_sums) / len(a_sums))
        out["reward/b"].append(sum(b_sums) / len(b_sums))
        out["extra/speed"].append(sum(speeds) / len(speeds))
        out["extra/pos"].append(10 * sum(speeds) / len(speeds))
    return out


def read_csv_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            out[row["name"]].append((int(row["step"]), float(row["value"])))
    return out


@pytest.fixture(scope="module")
def extras_run(tmp_path_factory) -> tuple[Path, Runner]:
    """A 200-step PPO run on `ComponentsEnv`, logged to TensorBoard and CSV every update."""
    run_dir = tmp_path_factory.mktemp("extras")
    cfg = validate(TrainConfig(
        algo=PPOConfig(n_steps=N_STEPS, batch_size=2 * N_STEPS, n_epochs=1, hidden_sizes=[8]),
        env=EnvConfig(id=ENV_ID, num_envs=2, normalize_obs=True, normalize_reward=True),
        logger=LoggerConfig(tensorboard=True, csv=True, log_freq=0, log_norm_stats=True,
                            extra_log_keys=["pos", "frame", "name", "spawn", "absent"]),
        eval=EvalConfig(freq=0, episodes=2, num_envs=2), checkpoint=CheckpointConfig(freq=0),
        total_timesteps=TOTAL, progress="off"))
    runner = Runner(cfg, run_dir)
    runner.run()
    return run_dir, runner


def test_reward_components_and_extras_in_csv_match_the_episode_sums(extras_run):
    run_dir, _ = extras_run
    scalars = read_csv_scalars(run_dir / "metrics.csv")
    periods = TOTAL // (2 * N_STEPS)
    expected = expected_by_period(periods)
    for name in ("reward/a", "reward/b", "extra/speed", "extra/pos"):
        steps = [s for s, _ in scalars[name]]
        assert steps == [2 * N_STEPS * (p + 1) for p in range(periods)], name
        assert [v for _, v in scalars[name]] == pytest.approx(expected[name]), name
    # one number per env only: the 8x8 frame, the string and absent keys are never logged
    assert not {"extra/frame", "extra/name", "extra/spawn", "extra/absent"} & set(scalars)


def test_reward_components_and_extras_in_tensorboard_match_the_csv(extras_run):
    run_dir, _ = extras_run
    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0}).Reload()
    scalars = read_csv_scalars(run_dir / "metrics.csv")
    for name in ("reward/a", "reward/b", "extra/speed", "extra/pos"):
        tb = [(e.step, e.value) for e in acc.Scalars(name)]
        assert [s for s, _ in tb] == [s for s, _ in scalars[name]]
        assert [v for _, v in tb] == pytest.approx([v for _, v in scalars[name]], rel=1e-6)
    assert "extra/frame" not in acc.Tags()["scalars"]


def test_log_norm_stats_logs_the_observation_and_reward_statistics(extras_run):
    run_dir, runner = extras_run
    scalars = read_csv_scalars(run_dir / "metrics.csv")
    # observations cycle 0,1,2 (env 0) and 0..4 (env 1): after whole cycles the running mean
    # is the mean of everything seen; the last log is after the last step, so it is exact
    reward_layer, obs_layer = runner.env, runner.env.env
    mean, std = float(obs_layer.rms.mean[0]), float(obs_layer.rms.var[0].sqrt())
    assert scalars["norm/obs_mean/0"][-1][1] == pytest.approx(mean, rel=1e-9)
    assert scalars["norm/obs_std/0"][-1][1] == pytest.approx(std, rel=1e-9)
    assert 1.3 < mean < 2.0 and std > 0.5  # raw obs statistics, not the normalized ones (0, 1)
    assert scalars["norm/obs_count"][-1][1] == pytest.approx(2 + TOTAL, abs=1e-3)
    assert scalars["norm/reward_std"][-1][1] == pytest.approx(float(reward_layer.rms.var.sqrt()))
    assert scalars["norm/reward_count"][-1][1] == pytest.approx(TOTAL, abs=1e-3)


def test_the_step_that_ends_an_episode_is_taken_from_final_info():
    venv = SyncVectorEnv([ComponentsEnv, ComponentsEnv], autoreset_mode=AutoresetMode.SAME_STEP)
    venv.reset(seed=0)  # lengths 3 and 5
    for _ in range(2):
        venv.step(np.zeros(2, np.int64))
    _, _, terminated, _, info = venv.step(np.zeros(2, np.int64))  # env 0 ends at t=3
    assert terminated.tolist() == [True, False]
    out = vector_extras(info, ("pos", "frame", "name", "spawn"))
    assert out["reward_components"]["b"].tolist() == [6.0, 6.0]
    assert out["log"]["speed"].tolist() == [3.0, 3.0]
    assert out["log"]["pos"].tolist() == [30.0, 30.0]  # not env 0's reset info (-1000)
    assert set(out["log"]) == {"speed", "pos"}  # spawn is only in reset infos
    venv.close()


def test_info_without_extras_gives_nothing():
    assert vector_extras({}) == {}
    assert vector_extras({"final_obs": np.zeros(2), "_final_obs": np.ones(2, bool),
                          "final_info": {}, "_final_info": np.ones(2, bool)}) == {}


def step_result(n: int, info: dict) -> StepResult:
    z = torch.zeros(n)
    return StepResult(z, z, z.bool(), z.bool(), z, info)


def test_tracker_sums_torch_components_per_row_and_averages_ended_episodes():
    tracker = EpisodeTracker(extra_keys=["energy"])
    for t in range(1, 4):
        info = {"reward_components": {"c": torch.tensor([1.0, 10.0, 100.0])},
                "log": {"v": torch.tensor([t, t, t], dtype=torch.float32), "img": torch.zeros(3, 5)},
                "energy": 2.0 * t}
        if t == 3:  # rows 0 and 2 end at step 3 (their sums include it); row 1 goes on
            info["episode"] = {"index": torch.tensor([0, 2]), "return": [0.0, 0.0],
                               "length": [3, 3], "terminated": 2, "truncated": 0}
        tracker.record(step_result(3, info))
    metrics = tracker.metrics()
    assert metrics["reward/c"] == pytest.approx((3.0 + 300.0) / 2)
    assert metrics["extra/v"] == pytest.approx(2.0)
    assert metrics["extra/energy"] == pytest.approx(4.0)
    assert "extra/img" not in metrics
    # next period: row 1 ends after one more step with its whole episode (4 steps x 10)
    tracker.record(step_result(3, {
        "reward_components": {"c": torch.tensor([1.0, 10.0, 100.0])},
        "episode": {"index": np.array([1]), "return": [0.0], "length": [4], "terminated": 1,
                    "truncated": 0}}))
    metrics = tracker.metrics()
    assert metrics["reward/c"] == pytest.approx(40.0)
    assert not any(k.startswith("extra/") for k in metrics)  # extras cover one period only
    assert "reward/c" not in tracker.metrics()  # no episode ended since


def test_tracker_state_round_trip_keeps_running_sums():
    tracker = EpisodeTracker()
    tracker.record(step_result(2, {"reward_components": {"c": np.array([1.0, 2.0])},
                                   "log": {"v": 3.0}}))
    restored = EpisodeTracker()
    restored.load_state_dict(tracker.state_dict())
    for t in (tracker, restored):
        t.record(step_result(2, {
            "reward_components": {"c": np.array([1.0, 2.0])},
            "episode": {"index": np.array([1]), "return": [0.0], "length": [2],
                        "terminated": 1, "truncated": 0}}))
    assert tracker.metrics() == restored.metrics() == pytest.approx(
        {"reward/c": 4.0, "extra/v": 3.0, "episode/mean_reward": 0.0, "episode/mean_length": 2.0,
         "episode/terminated_count": 1.0, "episode/truncated_count": 0.0})
