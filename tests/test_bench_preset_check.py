"""The preset check's bookkeeping (benchmarks/preset_check.py): each task's `env=` option picks
the preset the table names, the `learned` line, and the table. No training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import preset_check  # noqa: E402
import quality  # noqa: E402


def test_every_check_is_a_shipped_preset_outside_the_quality_table():
    shipped = {p.stem for p in (Path(__file__).resolve().parents[1] / "conf" / "tuned").glob("*.yaml")}
    quality_presets = {t.preset for t in quality.TASKS.values()}
    for (algo, _env), check in preset_check.CHECKS.items():
        assert check.preset in shipped and check.preset not in quality_presets, check
        assert check.preset.startswith(algo + "_") and check.budget > 0 and check.published > 0


@pytest.mark.parametrize("task", ["ppo:Hopper-v5", "td3:LunarLanderContinuous-v3", "sac:Ant-v5"])
def test_the_command_line_applies_the_named_preset_and_budget(task):
    from rltrain.config.compose import compose_train_config

    algo, env = preset_check.parse_task(task)
    cfg = compose_train_config(preset_check.overrides(algo, env, 3))
    check = preset_check.CHECKS[(algo, env)]
    assert (cfg.preset, cfg.total_timesteps, cfg.seed) == (check.preset, check.budget, 3)
    assert cfg.eval.freq == 0 and cfg.eval.episodes == 10 and cfg.checkpoint.freq == 0


def test_an_unknown_task_is_refused_with_the_known_ones():
    with pytest.raises(SystemExit, match="unknown task 'ppo:Pong'.*ppo:Hopper-v5"):
        preset_check.parse_task("ppo:Pong")


def test_learned_needs_a_quarter_of_the_gap_from_random_to_published():
    assert preset_check.learned(25.0, 0.0, 100.0)
    assert not preset_check.learned(24.9, 0.0, 100.0)
    assert preset_check.learned(-50.0, -100.0, 100.0)  # -100 + 0.25 * 200
    assert not preset_check.learned(-51.0, -100.0, 100.0)


def test_the_table_shows_runs_random_returns_and_what_is_missing(tmp_path):
    results = {"random": {"Hopper-v5": 18.0, "Walker2d-v5": -1.5},
               "runs": {"ppo:Hopper-v5": {"1": {"final_eval": 2200.0, "seconds": 900.0,
                                                "date": "2026-11-26"},
                                          "0": {"final_eval": 100.0, "seconds": 1000.0,
                                                "date": "2026-11-26"}},
                        "sac:Walker2d-v5": {"0": {"final_eval": 3000.0, "seconds": 10.0,
                                                  "date": "2026-11-27"}}}}
    preset_check.write(results, tmp_path)
    text = (tmp_path / "preset_check.md").read_text()
    hopper = next(x for x in text.splitlines() if x.startswith("| ppo:Hopper-v5"))
    assert "0: 100.0, 1: 2200.0" in hopper and "| 1000, 900 |" in hopper
    assert "| 18.0 |" in hopper and "2410.4 at 1M (v3)" in hopper and "**no**, yes" in hopper
    assert "Not run yet: td3:HalfCheetah-v5" in text and "sac:Walker2d-v5" not in text.split(
        "Not run yet")[1]
    assert json.loads((tmp_path / "preset_check.json").read_text()) == results
