"""The process wall-clock benchmark's bookkeeping (benchmarks/process_gaps.py): the commands it
times, reading a finished run's final eval, medians, the ratio and the two-part target. The
rltrain side is also run for real once, on a tiny budget, through the same command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import process_gaps  # noqa: E402


def rec(seconds: float, final: float) -> dict:
    return {"seconds": seconds, "final_eval": final, "date": "2026-11-24"}


def runs(ours: list[tuple[float, float]], theirs: list[tuple[float, float]]) -> dict:
    return {"dqn:CartPole-v1": {
        "rltrain": {str(s): rec(*r) for s, r in enumerate(ours)},
        "sb3": {str(s): rec(*r) for s, r in enumerate(theirs)}}}


def row(data: dict) -> dict:
    return next(r for r in process_gaps.summarize(data) if r["task"] == "dqn:CartPole-v1")


def test_the_target_needs_both_the_time_ratio_and_a_final_eval_no_worse_than_sb3s():
    fast_and_good = row(runs([(10, 500), (12, 480), (11, 20)], [(40, 500), (36, 20), (33, 10)]))
    assert fast_and_good["ratio"] == pytest.approx(11 / 36)
    assert fast_and_good["rltrain"]["median_final"] == 480
    assert fast_and_good["met"] is True
    slow = row(runs([(13, 500)] * 3, [(36, 20)] * 3))  # 0.36 > 0.33
    assert slow["met"] is False
    worse = row(runs([(5, 100)] * 3, [(36, 200)] * 3))
    assert worse["ratio"] < 0.33 and worse["met"] is False
    half = row(runs([(5, 100)], []))
    assert half["ratio"] is None and half["met"] is None
    assert "| dqn:CartPole-v1 | 50,000 | **5.0** [5] | **100.0** [100] | missing" in \
        process_gaps.markdown(process_gaps.summarize(runs([(5, 100)], [])))


def test_the_rltrain_side_is_the_users_command_and_its_final_eval_comes_from_metrics(tmp_path):
    cmd = process_gaps.rltrain_command("dqn:CartPole-v1", 2, tmp_path / "run")
    assert cmd[1:] == ["-m", "rltrain", "algo=dqn", "env=CartPole-v1", "seed=2",
                       f"hydra.run.dir={tmp_path / 'run'}", "progress=off"]
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("step,time,name,value\n10,1.0,eval/mean_reward,3.5\n"
                       "10,1.0,final/eval_mean,7.25\n")
    assert process_gaps.final_eval_from_metrics(metrics) == 7.25
    metrics.write_text("step,time,name,value\n10,1.0,eval/mean_reward,3.5\n")
    with pytest.raises(RuntimeError, match="did not finish"):
        process_gaps.final_eval_from_metrics(metrics)


def test_a_real_rltrain_run_through_the_benchmark_command_has_a_final_eval(tmp_path):
    cmd = process_gaps.rltrain_command("ppo:CartPole-v1", 0, tmp_path / "run")
    done = subprocess.run([*cmd, "total_timesteps=256", "eval.episodes=1", "logger=none"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert process_gaps.final_eval_from_metrics(tmp_path / "run" / "metrics.csv") > 0
