"""benchmarks/seed_batch.py without training: its task names, its verdicts and its report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import seed_batch  # noqa: E402


def test_tasks_parse_and_bad_ones_are_refused():
    assert seed_batch.parse_task("dqn:CartPole-v1:50000") == ("dqn", "CartPole-v1", 50_000)
    for bad in ("dqn:CartPole-v1", "td3:Pendulum-v1:1000", "ppo:Hopper-v5:1000",
                "ppo:CartPole-v1:0", "ppo:CartPole-v1:1e5"):
        with pytest.raises(SystemExit, match="algo:env:budget"):
            seed_batch.parse_task(bad)
    assert set(seed_batch.TARGETS) == {"ppo:CartPole-v1:100000", "sac:Pendulum-v1:20000",
                                       "dqn:CartPole-v1:50000"}


def _row(seconds: float, one: float, evals: dict[int, float], env: str = "CartPole-v1") -> dict:
    return {"seconds": seconds, "evals": evals, "ratio_to_one_seed": seconds / one,
            "all_reach_threshold": all(v >= seed_batch.THRESHOLD[env] for v in evals.values())}


def test_verdict_needs_the_ratio_and_every_seed():
    task = "dqn:CartPole-v1:50000"  # target 3x
    one = _row(10.0, 10.0, {0: 500.0})
    fast_bad_seed = {"one seed": one,
                     "num_seeds=8, 1 thread(s)": _row(25.0, 10.0, {0: 500.0, 1: 20.0})}
    slow = {"one seed": one, "num_seeds=8, 1 thread(s)": _row(45.0, 10.0, {0: 500.0, 1: 500.0}),
            "num_seeds=8, 2 thread(s)": _row(31.0, 10.0, {0: 500.0, 1: 500.0})}
    good = {**slow, "num_seeds=8, 2 thread(s)": _row(29.0, 10.0, {0: 500.0, 1: 480.0})}
    assert seed_batch.target_met(task, fast_bad_seed) == "no (a seed below the threshold)"
    assert seed_batch.target_met(task, slow) == "no (3.10x > 3.0x)"  # the fastest row counts
    assert seed_batch.target_met(task, good) == "yes"
    assert seed_batch.target_met("ppo:CartPole-v1:1000", good) == "no target"


def test_report_has_a_table_per_task_and_the_json(tmp_path):
    one = _row(10.0, 10.0, {0: 500.0})
    ppo = {"one seed": one, "num_seeds=2, 1 thread(s)": _row(20.0, 10.0, {0: 500.0, 1: 500.0})}
    sac = {"one seed": _row(5.0, 5.0, {0: -150.0}, "Pendulum-v1"),
           "num_seeds=2, 1 thread(s)": _row(20.0, 5.0, {0: -150.0, 1: -300.0}, "Pendulum-v1")}
    results = {"date": "2026-11-24", "seeds": 2, "cpu": "x86_64, 2 CPUs, load at start 0.10",
               "tasks": {"ppo:CartPole-v1:100000": ppo, "sac:Pendulum-v1:20000": sac}}
    text = seed_batch.report(results, tmp_path)
    assert "## ppo:CartPole-v1:100000 (target 2.5x one seed): yes" in text
    assert "## sac:Pendulum-v1:20000 (target 3.0x one seed): no (4.00x > 3.0x)" in text
    assert "| num_seeds=2, 1 thread(s) | 20.0 | 4.00 | no | -150, -300 |" in text
    assert (tmp_path / "seed_batch.md").read_text() == text
    written = json.loads((tmp_path / "seed_batch.json").read_text())
    assert written["tasks"].keys() == results["tasks"].keys()


def test_distribution_seeds_start_at_first_seed(monkeypatch, tmp_path):
    trained = {}

    def batch(algo, env, budget, n, threads, root, first=0):
        trained["batch"] = list(range(first, first + n))
        return 1.0, {s: 500.0 for s in range(first, first + n)}

    def single(algo, env, budget, seed, root):
        trained.setdefault("single", []).append(seed)
        return 1.0, 100.0

    monkeypatch.setattr(seed_batch, "train_batch", batch)
    monkeypatch.setattr(seed_batch, "train_single", single)
    args = seed_batch.argparse.Namespace(distribution=3, first_seed=20, dist_budget=1000)
    dist = seed_batch.distribution("dqn:CartPole-v1:50000", args, tmp_path)
    assert trained == {"batch": [20, 21, 22], "single": [20, 21, 22]}
    assert dist["first_seed"] == 20 and dist["median"] == [500.0, 100.0]
    text = seed_batch.report({"date": "d", "seeds": 3, "cpu": "c", "tasks": {},
                              "distribution": dist}, tmp_path)
    assert "seeds 20-22 at 1,000 steps" in text


def test_a_run_stopped_before_its_budget_writes_no_timing(tmp_path, monkeypatch):
    """A SIGTERM (the benchmark's own timeout) stops a batch gracefully: its partial time must
    not become a result row (on the GPU machine a SAC batch cut at 4,299 of 5,000 steps read
    as 1.51x one seed)."""
    from rltrain.seed_batch import runner as seed_runner

    monkeypatch.setattr(seed_runner.SeedRunner, "run",
                        lambda self: {"final_eval": {}, "stopped": {"7": "SIGTERM"}})
    with pytest.raises(SystemExit, match="num_seeds=8 stopped early"):
        seed_batch.train_batch("sac", "Pendulum-v1", 5000, 8, 1, tmp_path)
    from rltrain.runner import runner as single

    monkeypatch.setattr(single.Runner, "run", lambda self: {"mean_reward": -150.0,
                                                            "stopped": "SIGTERM"})
    with pytest.raises(SystemExit, match="seed 0 stopped early"):
        seed_batch.train_single("sac", "Pendulum-v1", 5000, 0, tmp_path)
