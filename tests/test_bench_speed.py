"""The speed benchmark's bookkeeping (benchmarks/speed.py): medians, fall-backs and ratios."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import speed  # noqa: E402


def run(side: str, seed: int, seconds: float | None, solved: bool, final: float,
        task: tuple[str, str] = ("ppo", "CartPole-v1")) -> dict:
    return {"side": side, "algo": task[0], "env": task[1], "seed": seed,
            "seconds_to_threshold": seconds, "steps_to_threshold": None if seconds is None else 1000,
            "solved": solved, "final_return": final, "sps": 100.0}


def test_a_seed_that_falls_back_counts_as_unsolved_in_the_ratio_but_not_the_first_hit():
    runs = [run("rltrain", 0, 1.0, True, 500), run("rltrain", 1, 2.0, True, 500),
            run("rltrain", 2, 0.5, False, 300),  # reached 475, then fell back: inf
            run("sb3", 0, 6.0, True, 500), run("sb3", 1, 9.0, True, 490),
            run("sb3", 2, 12.0, True, 480)]
    (row,) = speed.summarize(runs)
    assert row["rltrain"]["seconds"] == 2.0  # median of 1, 2, inf
    assert row["rltrain"]["first_hit_seconds"] == 1.0  # median of 1, 2, 0.5
    assert row["sb3"]["seconds"] == 9.0
    assert math.isclose(row["ratio"], 2.0 / 9.0)
    assert math.isclose(row["first_hit_ratio"], 1.0 / 9.0)
    assert row["final_ok"] and row["pass"]


def test_ratio_rules_for_unsolved_sides():
    assert speed.ratio(2.0, math.inf) == 0.0
    assert speed.ratio(math.inf, 3.0) == math.inf
    assert speed.ratio(math.inf, math.inf) is None


def test_slower_or_worse_final_fails_the_target():
    slow = [run("rltrain", 0, 5.0, True, 500), run("sb3", 0, 10.0, True, 500)]
    assert not speed.summarize(slow)[0]["pass"]  # 0.5 > 0.33
    worse = [run("rltrain", 0, 1.0, True, -190, ("sac", "Pendulum-v1")),
             run("sb3", 0, 10.0, True, -150, ("sac", "Pendulum-v1"))]
    (row,) = speed.summarize(worse)
    assert row["ratio"] == 0.1 and row["final_ok"]  # -190 still clears the -200 threshold
    worse[0]["final_return"] = -210.0
    worse[0]["solved"] = False
    assert not speed.summarize(worse)[0]["pass"]


def test_markdown_lists_every_task_and_marks_fall_backs(tmp_path):
    runs = [run("rltrain", 0, 1.0, True, 500), run("sb3", 0, 4.0, False, 300)]
    rows = speed.write(tmp_path, {"date": "d", "machine": "m", "budget": "b", "seeds": [0]},
                       runs, None)
    text = (tmp_path / "speed.md").read_text()
    assert "| ppo CartPole-v1 | 1.00 |" in text and "4.0 (fell back)" in text
    assert (tmp_path / "speed.json").exists() and rows[0]["ratio"] == 0.0


def test_collection_throughput_runs_through_the_current_runner():
    import rltrain_side  # noqa: E402 - benchmarks/ is on sys.path above

    assert rltrain_side.collection_sps("CartPole-v1", 2, seconds=0.05) > 0
