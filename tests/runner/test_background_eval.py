"""Periodic evaluations off the training path (`eval.background`, `evaluation/background.py`):
the same results as in the training process, `best.pt` from them, an evaluator that dies, a
Ctrl-C while it runs, and the resume after it. Each run here starts a real evaluator process."""

from __future__ import annotations

import csv
import os
import signal
from pathlib import Path

import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.evaluation import background
from rltrain.runner.runner import Runner
from tests.e2e.harness import no_stray_signal  # noqa: F401  (fixture)

BASE = ["algo=ppo", "env=CartPole-v1", "env.num_envs=4", "algo.n_steps=64", "algo.batch_size=64",
        "total_timesteps=2048", "eval.freq=256", "eval.episodes=4", "checkpoint.freq=256",
        "checkpoint.keep_last=100", "progress=off"]


def evals(run_dir: Path) -> dict[int, float]:
    with open(run_dir / "metrics.csv") as f:
        return {int(r["step"]): float(r["value"]) for r in csv.DictReader(f)
                if r["name"] == "eval/mean_reward"}


def policy(path: Path) -> dict[str, torch.Tensor]:
    return checkpoint.load(path)["algo"]["policy"]


def run(tmp_path: Path, name: str, *extra: str, callback=None) -> tuple[Runner, dict]:
    runner = Runner(compose_train_config([*BASE, *extra]), tmp_path / name)
    if callback is not None:
        runner.add_callback("post_iteration", lambda state: callback(runner, state))
    return runner, runner.run()


def test_background_evaluations_equal_the_training_process_ones_and_pick_best(tmp_path):
    _, _ = run(tmp_path, "here", "eval.background=false")
    runner, _ = run(tmp_path, "away", "eval.background=true")
    here, away = evals(tmp_path / "here"), evals(tmp_path / "away")
    periodic = {s: v for s, v in away.items() if s < 2048}
    assert periodic, away  # at least one evaluation came back from the evaluator
    for step, value in away.items():
        assert value == here[step], (step, away, here)
    best_step = checkpoint.load(tmp_path / "away" / "checkpoints" / "best.pt")["counters"]
    best_step = best_step["global_step"]
    assert away[best_step] == max(away.values())
    # best.pt holds the weights that were evaluated, not the live ones of when the result came
    torch.testing.assert_close(policy(tmp_path / "away" / "checkpoints" / "best.pt"),
                               policy(tmp_path / "here" / "checkpoints" / f"step_{best_step:09d}.pt"))
    assert runner.background_evals.evaluator is None  # ended with the run


def test_a_dead_evaluator_is_said_once_and_the_run_evaluates_in_its_own_process(tmp_path, caplog):
    killed = []

    def kill(runner: Runner, state) -> None:
        if runner.background_evals.evaluator is not None and runner.background_evals.evaluator.pending is not None and not killed:
            runner.background_evals.evaluator.process.kill()
            killed.append(state.global_step)

    runner, result = run(tmp_path, "run", "eval.background=true", callback=kill)
    assert killed and "stopped" not in result
    said = [r.getMessage() for r in caplog.records if "background evaluation stopped" in r.getMessage()]
    assert len(said) == 1 and "evaluating in the training process from now on" in said[0], said
    after = [s for s in evals(tmp_path / "run") if s > killed[0]]
    assert len(after) >= 3, evals(tmp_path / "run")  # evaluated here from then on, none skipped
    assert (tmp_path / "run" / "checkpoints" / "final.pt").is_file()


def test_ctrl_c_while_the_evaluator_runs_stops_the_run_ends_the_evaluator_and_resumes(
        tmp_path, no_stray_signal):  # noqa: F811
    seen = {}

    def interrupt(runner: Runner, state) -> None:
        if runner.background_evals.evaluator is not None and runner.background_evals.evaluator.pending is not None and not seen:
            seen["process"] = runner.background_evals.evaluator.process
            seen["step"] = state.global_step
            os.kill(os.getpid(), signal.SIGINT)

    runner, result = run(tmp_path, "run", "eval.background=true", callback=interrupt)
    assert result["stopped"] == "SIGINT" and seen
    seen["process"].join(timeout=5)
    assert not seen["process"].is_alive()  # no evaluator left behind
    latest = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] == runner.state.global_step
    again = Runner(compose_train_config([*BASE, "eval.background=true"]), tmp_path / "run",
                   resume_from=latest)
    assert "stopped" not in again.run()
    assert (tmp_path / "run" / "checkpoints" / "final.pt").is_file()


@pytest.mark.parametrize("setting, total, freq, threads, solo, rebuildable, cores, on", [
    ("auto", 100_000, 10_000, 1, True, True, 2, True),
    ("auto", 100_000, 10_000, 2, True, True, 2, False),    # no spare core
    ("auto", 20_000, 2_000, 1, True, True, 2, False),      # too short to repay the start-up
    ("auto", 100_000, 0, 1, True, True, 2, False),         # no periodic evaluations
    ("true", 1_000, 100, 2, True, True, 1, True),
    ("true", 1_000, 100, 1, False, True, 2, False),        # a seed batch, torchrun
    ("true", 1_000, 100, 1, True, False, 2, False),        # an algorithm built in Python
    ("false", 10**6, 10_000, 1, True, True, 8, False),
])
def test_when_evaluations_go_to_the_background(monkeypatch, setting, total, freq, threads, solo,
                                               rebuildable, cores, on):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert background.wanted(setting, total, freq, threads, solo, rebuildable) is on


def test_a_script_without_a_main_guard_trains_once(tmp_path):
    """`rltrain.train()` at the top level of a script (no `if __name__ == "__main__":`): the
    evaluator process must not run the script again (a fresh interpreter: the real case)."""
    import subprocess
    import sys

    script = tmp_path / "train_me.py"
    script.write_text(
        "import pathlib, rltrain\n"
        "marker = pathlib.Path(__file__).with_name('runs.txt')\n"
        "marker.write_text(marker.read_text() + 'x' if marker.exists() else 'x')\n"
        f"rltrain.train({[*BASE, 'eval.background=true', 'total_timesteps=1024']!r}, "
        f"run_dir={str(tmp_path / 'run')!r})\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "runs.txt").read_text() == "x"
    assert "periodic evaluations run in a second process" in proc.stdout + proc.stderr
