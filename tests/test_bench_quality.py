"""The quality benchmark's bookkeeping (benchmarks/quality.py): merging runs across sessions,
medians, the rltrain/SB3 time ratio, floors, "missing", and the markdown. No training."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import quality  # noqa: E402

TASK = "sac:Hopper-v5"  # floor 1000 and >= the SB3 median
FLOOR_ONLY = "dqn:MountainCar-v0"  # floor -110, no SB3 condition


def rec(final: float, seconds: float, date: str = "2026-11-24") -> dict:
    return {"final_eval": final, "seconds": seconds, "budget": 1, "date": date}


def filled(task: str, rltrain: list[tuple[float, float]], sb3: list[tuple[float, float]]) -> dict:
    results = quality.empty_results()
    for side, runs in (("rltrain", rltrain), ("sb3", sb3)):
        for seed, (final, seconds) in enumerate(runs):
            quality.merge(results, task, side, seed, rec(final, seconds))
    return results


def row_of(results: dict, task: str) -> dict:
    (row,) = [r for r in quality.summarize(results) if r["task"] == task]
    return row


def test_every_task_has_a_budget_a_floor_and_an_sb3_entry_where_it_must_beat_sb3():
    from sb3_side import RL_ZOO

    for (algo, env), task in quality.TASKS.items():
        assert task.budget > 0 and math.isfinite(task.floor)
        if task.beat_sb3:
            assert (task.algo or algo, env) in RL_ZOO
        assert quality.parse_task(quality.task_key(algo, env)) == (algo, env)


def test_the_atari_task_keeps_the_slash_of_its_id():
    assert quality.parse_task("ppo:ALE/Breakout-v5") == ("ppo", "ALE/Breakout-v5")
    assert "env.id=ALE/Breakout-v5" in quality.rltrain_overrides("ppo", "ALE/Breakout-v5", 0)


def test_merge_replaces_one_seed_and_keeps_the_others():
    results = filled(TASK, [(1100, 10), (1200, 20)], [])
    quality.merge(results, TASK, "rltrain", 1, rec(900, 30))
    runs = results["runs"][TASK]["rltrain"]
    assert runs["0"]["final_eval"] == 1100 and runs["1"]["final_eval"] == 900


def test_a_complete_task_passes_when_it_reaches_the_floor_and_the_sb3_median():
    results = filled(TASK, [(1500, 10), (1100, 30), (1300, 20)], [(1000, 40), (1200, 80), (900, 60)])
    row = row_of(results, TASK)
    assert row["sides"]["rltrain"]["median_final"] == 1300
    assert row["sides"]["sb3"]["median_final"] == 1000
    assert math.isclose(row["time_ratio"], 20 / 60)
    assert row["status"] == "pass"


def test_below_the_sb3_median_fails_even_above_the_floor():
    results = filled(TASK, [(1100, 1), (1100, 1), (1100, 1)], [(1200, 1), (1300, 1), (1250, 1)])
    assert row_of(results, TASK)["status"] == "FAIL"


def test_a_missing_seed_or_side_is_missing_not_a_verdict():
    one_seed = filled(TASK, [(5000, 1)], [(10, 1), (10, 1), (10, 1)])
    row = row_of(one_seed, TASK)
    assert row["status"] == "missing"
    assert row["sides"]["rltrain"]["finals"] == {0: 5000, 1: None, 2: None}
    no_sb3 = filled(TASK, [(5000, 1)] * 3, [])
    assert row_of(no_sb3, TASK)["status"] == "missing"
    assert row_of(no_sb3, TASK)["time_ratio"] is None
    # a task judged on its floor only does not wait for SB3
    floor_only = filled(FLOOR_ONLY, [(-100, 1), (-105, 1), (-120, 1)], [])
    assert row_of(floor_only, FLOOR_ONLY)["status"] == "pass"


def test_markdown_has_a_column_per_side_the_ratio_the_floor_missing_and_the_dates():
    results = filled(TASK, [(1500, 10), (1100, 30)], [(1000, 40), (1200, 80), (900, 60)])
    text = quality.markdown(quality.summarize(results))
    header, _, line = text.splitlines()[2:5]
    assert "rltrain" in header and "SB3" in header and "time ratio" in header
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[0] == TASK and "missing" in cells[2]  # seed 2 of rltrain
    assert cells[4] == f"{20 / 60:.2f}" and cells[5] == "—"  # 0.33: at the target
    assert cells[6] == "≥ 1000 and ≥ SB3"
    assert cells[7] == "missing" and cells[8] == "2026-11-24"


def test_the_rltrain_cell_names_an_engine_other_than_gymnasium():
    results = filled(TASK, [(1500, 10), (1100, 30), (1200, 20)], [(1000, 40)])
    line = quality.markdown(quality.summarize(results)).splitlines()[4]
    assert "gymnasium" not in line and "envpool" not in line  # older records: gymnasium, unsaid
    results["runs"][TASK]["rltrain"]["1"]["engine"] = "envpool"
    results["runs"][TASK]["rltrain"]["2"]["engine"] = "gymnasium"
    rltrain_cell = quality.markdown(quality.summarize(results)).splitlines()[4].split("|")[3]
    assert rltrain_cell.strip().endswith("s [10, 30, 20]; envpool and gymnasium")  # mixed: both
    for seed in "012":
        results["runs"][TASK]["rltrain"][seed]["engine"] = "envpool"
    rltrain_cell = quality.markdown(quality.summarize(results)).splitlines()[4].split("|")[3]
    assert rltrain_cell.strip().endswith("; envpool")


def test_a_row_on_another_engine_shows_the_sb3_runs_of_the_row_it_names_and_never_runs_them():
    gym_row, ale_row = "ppo:ALE/Breakout-v5", "ppo_ale:ALE/Breakout-v5"
    results = filled(gym_row, [(8.4, 1500)], [(5.1, 2000), (3.4, 2100), (10.0, 1900)])
    for seed, final in enumerate((9.0, 7.5, 8.8)):
        quality.merge(results, ale_row, "rltrain", seed, {**rec(final, 1000), "engine": "ale"})
    row = row_of(results, ale_row)
    assert row["sides"]["sb3"]["median_final"] == 5.1 and row["sides"]["sb3"]["complete"]
    assert row["status"] == "pass" and math.isclose(row["time_ratio"], 1000 / 2000)
    assert "ale" in quality.markdown([row])
    assert not quality.has_side("ppo_ale", "ALE/Breakout-v5", "sb3")
    assert "env.backend=ale" in quality.rltrain_overrides("ppo_ale", "ALE/Breakout-v5", 0)


def test_a_row_above_the_time_target_names_its_floor_or_says_it_is_not_measured():
    slow = filled(TASK, [(1500, 30), (1100, 30), (1200, 30)], [(1000, 40), (1200, 60), (900, 60)])
    rows = quality.summarize(slow)
    line = quality.markdown(rows).splitlines()[4]
    assert "| 0.50 | " + quality.TASKS[quality.parse_task(TASK)].time_floor + " |" in line
    rows[0]["time_floor"] = ""
    assert "| 0.50 | not measured |" in quality.markdown(rows).splitlines()[4]
    for key, task in quality.TASKS.items():  # every row of the committed table above the target
        row = next((r for r in quality.summarize(quality.load_results(
            Path(quality.__file__).parent / "results" / "quality.json")) if r["task"] ==
            quality.task_key(*key)), None)
        if row and row["time_ratio"] and round(row["time_ratio"], 2) > quality.TIME_TARGET:
            assert task.time_floor, f"{key}: above {quality.TIME_TARGET} with no time floor"


def test_write_then_load_round_trips_and_reads_the_old_list_format(tmp_path):
    results = filled(FLOOR_ONLY, [(-100, 1)], [(-105, 2)])
    quality.write(results, tmp_path)
    again = quality.load_results(tmp_path / "quality.json")
    assert again["runs"] == json.loads(json.dumps(results["runs"]))
    assert (tmp_path / "quality.md").read_text().count(FLOOR_ONLY) == 1
    old = {"runs": [{"algo": "ppo", "env": "CartPole-v1", "seed": 1, "final_eval": 500.0,
                     "seconds": 60.0, "budget": 100000}], "summary": []}
    (tmp_path / "quality.json").write_text(json.dumps(old))
    legacy = quality.load_results(tmp_path / "quality.json")
    assert legacy["runs"]["ppo:CartPole-v1"]["rltrain"]["1"]["final_eval"] == 500.0


def test_report_only_rewrites_the_markdown_without_training(tmp_path):
    quality.write(filled(FLOOR_ONLY, [(-100, 1)] * 3, []), tmp_path)
    assert quality.main(["--report", "--out", str(tmp_path)]) == 0
    assert "pass" in (tmp_path / "quality.md").read_text()
