"""The preset check's bookkeeping (benchmarks/preset_check.py): each task's `env=` option picks
the preset the table names, the `learned` line, and the table; and every tuned preset ships a
budget that was run (issue 46). No training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import preset_check  # noqa: E402
import quality  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RECORDED_ELSEWHERE = {
    ("sac_halfcheetah", 1_000_000): ("preset_trials.md", "**1M 10267.0**"),
}
"""(preset, budget) runs written down in a results page rather than a results JSON, with the text
that page holds about them."""
NEVER_RUN = {
    "dqn_atari": "RL-Zoo's 1e7 agent steps with 1M of exploration: no budget that runs here in "
                 "hours gets past its exploration; not measured yet",
    **{f"crossq_{env}": "RL-Zoo's crossq.yml values and budget, added with CrossQ; not "
                        "measured yet" for env in ("pendulum", "hopper", "halfcheetah")},
}
"""Presets that ship a budget no run here has reached, and why."""


def shipped_budgets() -> dict[str, int]:
    """preset name -> the `total_timesteps` its conf/tuned file ships."""
    out = {}
    for path in sorted((ROOT / "conf" / "tuned").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        out[data["preset"]] = int(data["total_timesteps"])
    return out


def measured_budgets() -> set[tuple[str, int]]:
    """(preset, budget) of every run the quality and preset-check results record."""
    quality_runs = json.loads((RESULTS / "quality.json").read_text())["runs"]
    check_runs = json.loads((RESULTS / "preset_check.json").read_text())["runs"]
    runs = [r for task in quality_runs.values() for r in task.get("rltrain", {}).values()]
    runs += [r for task in check_runs.values() for r in task.values()]
    return {(r["preset"], int(r["budget"])) for r in runs if "preset" in r}


def test_every_preset_ships_a_budget_that_was_run():
    measured = measured_budgets()
    unmeasured = {name: budget for name, budget in shipped_budgets().items()
                  if (name, budget) not in measured and (name, budget) not in RECORDED_ELSEWHERE
                  and name not in NEVER_RUN}
    assert not unmeasured, (f"presets whose total_timesteps no recorded run reached: {unmeasured}; "
                            f"run them (benchmarks/preset_check.py) or ship a measured budget")
    for (name, budget), (page, text) in RECORDED_ELSEWHERE.items():
        assert shipped_budgets()[name] == budget and text in (RESULTS / page).read_text()
    assert not {n for n, b in shipped_budgets().items() if n in NEVER_RUN and (n, b) in measured}


def test_the_budget_check_fails_on_a_preset_nobody_ran(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "NEVER_RUN", {})
    with pytest.raises(AssertionError, match="dqn_atari"):
        test_every_preset_ships_a_budget_that_was_run()


def test_every_check_runs_a_shipped_preset_at_its_shipped_budget():
    shipped = shipped_budgets()
    for (algo, _env), check in preset_check.CHECKS.items():
        assert shipped.get(check.preset) == check.budget, check
        assert check.preset.startswith(algo + "_") and check.published != 0
    quality_rows = {(t.preset, t.budget) for t in quality.TASKS.values()}
    assert not quality_rows & {(c.preset, c.budget) for c in preset_check.CHECKS.values()}


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
    not_run = text.split("Not run yet: ")[1]
    assert "td3:HalfCheetah-v5" in not_run and "sac:Walker2d-v5" not in not_run
    assert json.loads((tmp_path / "preset_check.json").read_text()) == results
