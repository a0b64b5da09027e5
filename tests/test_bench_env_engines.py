"""`env.backend=auto` follows the measured engine table (benchmarks/results/env_engines.json)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import env_engines  # noqa: E402

from rltrain.envs.engines import choice  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "env_engines.json"


def test_auto_follows_the_committed_engine_table():
    faster_from, measured = env_engines.derive_choice(json.loads(RESULTS.read_text()))
    assert faster_from == choice.FASTER_FROM
    assert measured == choice.MEASURED


def test_the_choice_is_the_smallest_count_from_which_envpool_always_wins():
    table = {"random": {
        "CartPole": {"gymnasium": {"1": 10, "8": 30, "64": 100},
                     "envpool": {"1": 3, "8": 40, "64": 90}},  # wins at 8, loses at 64: never
        "Hopper": {"gymnasium": {"1": 10, "8": 10, "64": 10}, "envpool": {"1": 5, "8": 25, "64": 30}},
        "HalfCheetah": {"gymnasium": {"1": 10, "8": 10, "64": 10},
                        "envpool": {"1": 5, "8": 9, "64": 32}},
    }}
    faster_from, measured = env_engines.derive_choice(table)
    never = env_engines.NEVER
    assert faster_from == {"CartPole-v1": never, "classic": never, "Hopper-v5": 8,
                           "mujoco": 64, "HalfCheetah-v5": 64}  # a kind: the later of its ids
    assert measured == {"Hopper-v5": 2.5, "HalfCheetah-v5": 3.2, "mujoco": 3.0}


def test_end_to_end_under_load_decides_where_it_was_measured():
    """Training end to end decides over random actions, and EnvPool must win by 5% on the
    machine as it was and with another process busy on one core (PPO Hopper at 8 envs lost
    under heavier load, 24.0 s against gymnasium's 16.8 s, while random actions said 1.3x)."""
    random = {"Hopper": {"gymnasium": {"8": 10, "64": 10}, "envpool": {"8": 30, "64": 30}}}
    ppo = {"Hopper": {"gymnasium": {"8": 10, "64": 10}, "envpool": {"8": 12, "64": 15}},
           "CartPole": {"gymnasium": {"8": 10, "64": 10}, "envpool": {"8": 9, "64": 11}}}
    loaded = {"Hopper": {"gymnasium": {"8": 10, "64": 10}, "envpool": {"8": 7, "64": 13}},
              "CartPole": {"gymnasium": {"8": 10, "64": 10}, "envpool": {"8": 12, "64": 9}}}
    faster_from, measured = env_engines.derive_choice(
        {"random": random, "ppo": ppo, "ppo_load": loaded})
    never = env_engines.NEVER
    assert faster_from == {"CartPole-v1": never, "classic": never, "Hopper-v5": 64,
                           "mujoco": 64}
    assert measured == {"Hopper-v5": 1.3, "mujoco": 1.3}
    # without the loaded table; and a 4% edge is noise, not faster
    ppo["CartPole"]["envpool"]["64"] = 10.4
    assert env_engines.derive_choice({"random": random, "ppo": ppo})[0] == {
        "CartPole-v1": never, "classic": never, "Hopper-v5": 8, "mujoco": 8}


def test_a_busy_core_is_a_process_running_for_the_block_only():
    import subprocess
    with env_engines.busy_core() as _:
        before = subprocess.run(["pgrep", "-f", "while True: pass"], capture_output=True,
                                text=True).stdout.split()
        assert before
    after = subprocess.run(["pgrep", "-f", "while True: pass"], capture_output=True,
                           text=True).stdout.split()
    assert not set(before) & set(after)


def test_engine_presets_runs_each_engine_on_the_preset_and_keeps_other_tasks(tmp_path):
    """benchmarks/engine_presets.py: the command line of each engine's run applies the task's
    preset and budget; the table gives each engine's seconds against gymnasium's."""
    import engine_presets

    from rltrain.config.compose import compose_train_config
    from rltrain.envs.engines.envpool import envpool_installed

    assert "env.backend=envpool" in engine_presets.overrides("ppo:Hopper-v5:4096", "envpool", 2)
    for engine in engine_presets.ENGINES if envpool_installed() else ("gymnasium",):
        cfg = compose_train_config(engine_presets.overrides("ppo:Hopper-v5:4096", engine, 2))
        assert (cfg.preset, cfg.env.backend, cfg.total_timesteps, cfg.seed) == (
            "ppo_hopper", engine, 4096, 2)
        assert cfg.eval.freq == 0 and cfg.checkpoint.freq == 0
    rows = [{"task": "t", "engine": "gymnasium", "seed": 0, "seconds": 200.0, "final": 1.0,
             "date": "d"},
            {"task": "t", "engine": "envpool", "seed": 0, "seconds": 150.0, "final": 2.0,
             "date": "d"}]
    engine_presets.write(rows, tmp_path)
    table = (tmp_path / "engine_presets.md").read_text()
    assert "| t | 0 | envpool | 150.0 | 0.75 | 2.0 | d |" in table
    assert json.loads((tmp_path / "engine_presets.json").read_text()) == rows


def test_ppo_cells_are_the_median_of_interleaved_rounds(tmp_path, monkeypatch):
    """`--rounds 3`: every cell is measured once per round, round after round (a slow spell of
    the machine lands on every cell alike), and keeps the median of its rounds; a cell that
    cannot run stays None."""
    calls = []
    rates = iter([10.0, 30.0, 5.0, 99.0, 20.0, 1.0, 40.0, 2.0, 3.0])

    def fake_rate(family, engine, n):
        calls.append((engine, n))
        return None if engine == "envpool" and n == 64 else next(rates)

    monkeypatch.setattr(env_engines, "ppo_rate", fake_rate)
    monkeypatch.setattr(env_engines, "busy_core", lambda loaded: contextlib.nullcontext())
    results = {"machine": "m", "date": "d", "random": {}, "ppo": {}, "random_load": {},
               "ppo_load": {}}
    env_engines.measure_ppo(results, ["CartPole"], [8, 64], [("", False)], 3, tmp_path)
    one_round = [("gymnasium", 8), ("envpool", 8), ("gymnasium", 64), ("envpool", 64)]
    assert calls == one_round * 3
    # gymnasium 8: 10, 99, 40; envpool 8: 30, 20, 2; gymnasium 64: 5, 1, 3
    assert results["ppo"]["CartPole"] == {"gymnasium": {"8": 40.0, "64": 3.0},
                                          "envpool": {"8": 20.0, "64": None}}
    assert json.loads((tmp_path / "env_engines.json").read_text())["ppo"] == results["ppo"]
    assert env_engines.median_of([4.0, 1.0]) == 2.5 and env_engines.median_of([]) is None
