"""The fastest-recipe table (benchmarks/fastest_recipe.py): the target, which rows count, the
fastest row per side, and its markdown. No training."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import fastest_recipe as fr  # noqa: E402
import quality  # noqa: E402


def results_with(rows: dict[tuple[str, str], list[tuple[float, float]]]) -> dict:
    """`{(task, side): [(final, seconds) per seed]}` as quality.json holds them."""
    results = quality.empty_results()
    for (task, side), runs in rows.items():
        for seed, (final, seconds) in enumerate(runs):
            quality.merge(results, task, side, seed,
                          {"final_eval": final, "seconds": seconds, "budget": 100_000})
    return results


HOPPER = {
    ("sac:Hopper-v5", "sb3"): [(500, 1300), (520, 1350), (600, 1400)],  # target 520
    ("tqc:Hopper-v5", "sb3"): [(1200, 2200), (1100, 2300), (1300, 2250)],  # contrib: no target
    ("sac:Hopper-v5", "rltrain"): [(1700, 880), (900, 1000), (3000, 840)],
    ("tqc:Hopper-v5", "rltrain"): [(2000, 700), (2100, 710), (1900, 690)],
    ("trpo:Hopper-v5", "rltrain"): [(400, 100), (450, 110), (430, 120)],  # fast, under target
    ("ars:Hopper-v5", "rltrain"): [(9000, 10), (9000, 10)],  # two seeds: does not count
    ("sac:Hopper-v5", "sbx"): [(530, 600), (510, 650), (700, 620)],
}


def entry(results: dict, env: str) -> dict:
    (e,) = [e for e in fr.summarize(results) if e["env"] == env]
    return e


def test_the_target_is_the_best_sb3_row_and_contrib_rows_compete_without_setting_it():
    results = results_with({**HOPPER, ("ppo:Hopper-v5", "sb3"): [(300, 10)] * 3})
    e = entry(results, "Hopper-v5")
    assert e["target"] == {"task": "sac:Hopper-v5", "return": 520}
    assert e["sides"]["rltrain"]["task"] == "tqc:Hopper-v5"  # 700 s; trpo is faster but lower
    assert e["sides"]["rltrain"]["median_seconds"] == 700
    assert e["sides"]["sb3"]["task"] == "sac:Hopper-v5"  # 1350 s beats contrib's 2250 s
    assert e["sides"]["sbx"]["task"] == "sac:Hopper-v5"  # 530 >= 520: reaches it
    assert "ars:Hopper-v5" not in e["ran"]["rltrain"]


def test_a_faster_contrib_row_is_sb3_sides_fastest():
    results = results_with({**HOPPER, ("tqc:Hopper-v5", "sb3"): [(1200, 900)] * 3})
    assert entry(results, "Hopper-v5")["sides"]["sb3"]["task"] == "tqc:Hopper-v5"


def test_the_markdown_names_rows_times_ratio_and_what_is_missing():
    text = fr.markdown(fr.summarize(results_with(HOPPER)))
    (hopper,) = [line for line in text.splitlines() if line.startswith("| Hopper-v5")]
    assert "520.0 (sac)" in hopper and "tqc: 2000.0 in ≤ 700 s" in hopper
    assert hopper.endswith("| 0.52 |")  # 700 / 1350
    (cheetah,) = [line for line in text.splitlines() if line.startswith("| HalfCheetah-v5")]
    assert "no SB3 row" in cheetah


def test_a_side_whose_rows_all_fall_short_lists_them():
    results = results_with({("ppo:LunarLander-v3", "sb3"): [(268.8, 1232)] * 3,
                            ("ppo:LunarLander-v3", "rltrain"): [(257.4, 208)] * 3})
    text = fr.markdown(fr.summarize(results))
    (line,) = [row for row in text.splitlines() if row.startswith("| LunarLander-v3")]
    assert "none reaches it (ran: ppo:LunarLander-v3)" in line
    assert "| not run |" in line and line.endswith("| — |")


def test_main_writes_the_table_and_refuses_a_missing_quality_file(tmp_path):
    path = tmp_path / "quality.json"
    with pytest.raises(SystemExit, match="not found"):
        fr.main(["--quality", str(path), "--out", str(tmp_path)])
    quality.write(results_with(HOPPER), tmp_path)
    assert fr.main(["--quality", str(path), "--out", str(tmp_path)]) == 0
    assert "tqc: 2000.0" in (tmp_path / "fastest_recipe.md").read_text()
    assert (tmp_path / "fastest_recipe.json").is_file()


def test_the_sbx_side_runs_only_tasks_sbx_has_a_class_for():
    assert quality.has_side("sac", "Hopper-v5", "sbx")
    assert not quality.has_side("trpo", "Hopper-v5", "sbx")  # SBX has no TRPO
    assert quality.has_side("trpo", "Hopper-v5", "sb3")


def test_the_readme_shows_the_table_the_quality_results_give():
    """README.md's fastest-recipe rows are `readme_rows` of the committed quality.json, so a
    new quality run that changes them fails here until the README follows."""
    root = Path(__file__).resolve().parents[1]
    table = fr.summarize(json.loads((root / "benchmarks/results/quality.json").read_text()))
    rows = fr.readme_rows(table)
    readme = (root / "README.md").read_text()
    assert "\n".join(rows) in readme, "README's fastest-recipe table is not:\n" + "\n".join(rows)


def test_each_readme_command_trains_what_the_quality_row_trained():
    """Every command the table shows composes to its quality row's preset, algorithm and
    budget (a label row, `ppo_2m`, included even before it is the fastest)."""
    from rltrain.config.compose import compose_train_config

    root = Path(__file__).resolve().parents[1]
    table = fr.summarize(json.loads((root / "benchmarks/results/quality.json").read_text()))
    shown = {e["sides"]["rltrain"]["task"] for e in table if e["target"] and e["sides"]["rltrain"]}
    for task_key in sorted(shown | {"ppo_2m:LunarLander-v3"}):
        algo, env = quality.parse_task(task_key)
        task = quality.TASKS[(algo, env)]
        cfg = compose_train_config(shlex.split(fr.command(task_key))[1:])
        assert cfg.preset == task.preset and cfg.total_timesteps == task.budget, task_key
        assert cfg.algo.name == (task.algo or algo), task_key
