"""Resuming: a run stopped and resumed logs exactly what an uninterrupted run logs; determinism
across runs (the config rules of `resume=` are tests/run_folder/test_resume_rules.py)."""

from __future__ import annotations

import csv
import logging
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.algos.configs.sac import SACConfig
from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import (
    CheckpointConfig,
    EnvConfig,
    EvalConfig,
    LoggerConfig,
    TrainConfig,
)
from rltrain.config.validation import validate
from rltrain.errors import UserError
from rltrain.runner.restore import Restored, say_resumed
from rltrain.runner.runner import Runner
from tests.test_checkpoint import assert_same


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    """Skip the matplotlib learning curve each run draws (0.7 s; not what is tested here)."""
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """`straight(cfg)`: the folder of an uninterrupted run of `cfg`, trained once per module."""
    runs: dict[str, Path] = {}

    def get(cfg: TrainConfig) -> Path:
        key = repr(cfg)
        if key not in runs:
            runs[key] = tmp_path_factory.mktemp("straight")
            Runner(cfg, runs[key]).run()
        return runs[key]

    return get


def metric_rows(run_dir: Path) -> list[tuple[int, str, str]]:
    """`metrics.csv` as (step, name, value) in file order, without the wall-clock metrics
    (`time/*`, `final/wall_clock_s`)."""
    with open(run_dir / "metrics.csv", newline="") as f:
        return [(int(r["step"]), r["name"], r["value"]) for r in csv.DictReader(f)
                if not r["name"].startswith("time/") and r["name"] != "final/wall_clock_s"]


def stop_at(step: int):
    """A `post_iteration` callback stopping the run once `step` env steps are done."""

    def fn(state):
        if state.global_step >= step:
            state.stop = True

    return fn


def train_with_a_stop(cfg: TrainConfig, run_dir: Path, step: int) -> dict:
    """Train until `step`, then finish in a new Runner resumed from `latest.pt` in the same dir."""
    Runner(cfg, run_dir, callbacks={"post_iteration": [stop_at(step)]}).run()
    stopped = checkpoint.load(run_dir / "checkpoints" / "latest.pt")
    assert stopped["counters"]["global_step"] == step
    assert not (run_dir / "checkpoints" / "final.pt").exists()
    return Runner(cfg, run_dir, resume_from=stopped).run()


def test_resume_with_a_budget_below_the_steps_done_is_refused_and_changes_nothing(
        tmp_path, tiny_cfg):
    """Else the run would end at once with final.pt, as if it had been asked for fewer steps."""
    run = tmp_path / "run"
    Runner(ppo_cfg(tiny_cfg), run, callbacks={"post_iteration": [stop_at(96)]}).run()
    latest = (run / "checkpoints" / "latest.pt").read_bytes()
    stopped = checkpoint.load(run / "checkpoints" / "latest.pt")
    with pytest.raises(UserError, match="has trained 96 env steps, more than "
                                        "total_timesteps=64; give total_timesteps=96 or more"):
        Runner(replace(ppo_cfg(tiny_cfg), total_timesteps=64), run, resume_from=stopped)
    assert (run / "checkpoints" / "latest.pt").read_bytes() == latest
    assert not (run / "checkpoints" / "final.pt").exists()
    result = Runner(replace(ppo_cfg(tiny_cfg), total_timesteps=96), run, resume_from=stopped).run()
    assert result["step"] == 96 and (run / "checkpoints" / "final.pt").exists()


def test_resume_with_the_runs_own_budget_finishes_a_run_that_overshot_it(tmp_path, tiny_cfg):
    """Parallel envs end a run past an odd budget (66 -> 68 with 4 envs); a crash before
    final.pt, then a resume with the same command line, must finish it."""
    run = tmp_path / "run"
    cfg = replace(ppo_cfg(tiny_cfg), total_timesteps=96)
    Runner(cfg, run, callbacks={"post_iteration": [stop_at(96)]}).run()
    stopped = checkpoint.load(run / "checkpoints" / "latest.pt")
    stopped["config"]["total_timesteps"] = 90  # what the run was asked for; 96 steps were taken
    result = Runner(replace(cfg, total_timesteps=90), run, resume_from=stopped).run()
    assert result["step"] == 96 and (run / "checkpoints" / "final.pt").exists()


def assert_same_run(a: Path, b: Path) -> None:
    """Same metrics, step for step, and the same final weights, optimizers and counters."""
    rows_a, rows_b = metric_rows(a), metric_rows(b)
    assert len(rows_a) > 20 and any(name.startswith("train/") for _, name, _ in rows_a)
    assert rows_b == rows_a
    final_a = checkpoint.load(a / "checkpoints" / "final.pt")
    final_b = checkpoint.load(b / "checkpoints" / "final.pt")
    assert_same(final_a["algo"], final_b["algo"], "algo")
    assert final_a["counters"] == final_b["counters"]


def ppo_cfg(tiny_cfg, **changes) -> TrainConfig:
    """PPO on CartPole: 32 env steps per iteration, 160 in all, evaluations at 96 and 160."""
    logger = {"csv": True, "log_freq": changes.pop("log_freq", 0), **changes.pop("logger", {})}
    return tiny_cfg(total_timesteps=160, eval={"freq": 80}, logger=logger, **changes)


@pytest.mark.parametrize(("log_freq", "stop"), [(0, 96), (40, 64), (0, 160)],
                         ids=["mid_run", "between_log_points", "at_the_last_step"])
def test_ppo_stopped_and_resumed_logs_what_an_uninterrupted_run_logs(tmp_path, tiny_cfg, straight,
                                                                      log_freq, stop):
    cfg = ppo_cfg(tiny_cfg, log_freq=log_freq)
    result = train_with_a_stop(cfg, tmp_path / "stopped", stop)
    assert_same_run(straight(cfg), tmp_path / "stopped")
    assert result["step"] == 160


def test_ppo_resumed_from_an_older_checkpoint_purges_the_later_log_rows(tmp_path, tiny_cfg):
    # A run killed after step 64's checkpoint had logged up to 160: resuming from step 64 drops
    # those rows (CSV and TensorBoard) and logs them again, identically.
    cfg = ppo_cfg(tiny_cfg, checkpoint={"freq": 64, "keep_last": 5},
                  logger={"csv": True, "tensorboard": True, "log_freq": 0})
    run = tmp_path / "run"
    Runner(cfg, run).run()
    straight = metric_rows(run)
    (run / "checkpoints" / "final.pt").unlink()  # killed before it finished: no final.pt
    Runner(cfg, run, resume_from=checkpoint.load(run / "checkpoints" / "step_000000064.pt")).run()
    assert metric_rows(run) == straight
    acc = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0}).Reload()
    for tag in ("train/policy_loss", "eval/mean_reward", "episode/mean_reward"):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert steps == sorted(set(steps)), (tag, steps)  # strictly increasing: no duplicates
        expected = [(s, float(v)) for s, n, v in straight if n == tag]
        assert steps == [s for s, _ in expected], tag
        assert [e.value for e in events] == pytest.approx([v for _, v in expected]), tag  # float32


def sac_cfg(save_buffer: bool) -> TrainConfig:
    """SAC on Pendulum (2 envs, 50-step episodes): learning from step 40, a train step every
    other vector step, evaluation every 100 steps, 200 steps in all."""
    return validate(TrainConfig(
        algo=SACConfig(hidden_sizes=[16, 16], buffer_size=1000, learning_starts=40, batch_size=32,
                       train_freq=2),
        env=EnvConfig(id="Pendulum-v1", num_envs=2, max_episode_steps=50),
        logger=LoggerConfig(tensorboard=False, csv=True, log_freq=0),
        eval=EvalConfig(freq=100, episodes=2, num_envs=2),
        checkpoint=CheckpointConfig(freq=0, save_buffer=save_buffer),
        total_timesteps=200, progress="off", seed=0))


def test_sac_with_saved_replay_buffer_resumes_bit_for_bit(tmp_path, straight):
    cfg = sac_cfg(save_buffer=True)
    train_with_a_stop(cfg, tmp_path / "stopped", 122)  # mid-episode, between two train steps
    assert_same_run(straight(cfg), tmp_path / "stopped")


def test_sac_without_saved_buffer_resumes_with_an_empty_buffer_and_finishes(tmp_path, caplog):
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="rltrain"):
        train_with_a_stop(sac_cfg(save_buffer=False), run, 120)
    assert "replay" not in checkpoint.load(run / "checkpoints" / "latest.pt")
    assert "replay buffer starts empty" in caplog.text
    final = checkpoint.load(run / "checkpoints" / "final.pt")
    assert final["counters"]["global_step"] == 200
    steps = [s for s, name, _ in metric_rows(run) if name == "buffer/size"]
    sizes = [float(v) for _, name, v in metric_rows(run) if name == "buffer/size"]
    assert steps == sorted(set(steps)) and steps[-1] == 200
    assert sizes[steps.index(120)] == 120 and sizes[-1] == 80  # refilled from step 120 on


def test_same_seed_gives_identical_runs_and_another_seed_differs(tmp_path, tiny_cfg, straight):
    first = straight(ppo_cfg(tiny_cfg, seed=0))
    for name, seed in (("again", 0), ("other", 1)):
        Runner(ppo_cfg(tiny_cfg, seed=seed), tmp_path / name).run()
    assert_same_run(first, tmp_path / "again")
    assert metric_rows(tmp_path / "other") != metric_rows(first)
    weights = [checkpoint.load(run / "checkpoints" / "final.pt")["algo"]["policy"]
               for run in (first, tmp_path / "other")]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_how_a_resume_went_is_one_line_per_outcome_naming_a_batchs_seeds(caplog):
    why = "simulator state is not saved (x)"
    with caplog.at_level(logging.INFO, logger="rltrain"):
        say_resumed("Env-v0", {0: Restored(64, None), 1: Restored(64, None),
                               2: Restored(32, why), 3: Restored(48, why)}, batch=True)
        say_resumed("Env-v0", {7: Restored(64, why)})  # a single run: as it always read
    assert [r.getMessage() for r in caplog.records] == [
        "seeds 0, 1 resumed at step 64 exactly",
        f"Env-v0: {why}; episodes restart on resume (seed 2 at step 32, seed 3 at step 48)",
        f"Env-v0: {why}; episodes restart on resume (at step 64)"]
