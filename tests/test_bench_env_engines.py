"""`env.backend=auto` follows the measured engine table (benchmarks/results/env_engines.json)."""

from __future__ import annotations

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
                        "envpool": {"1": 5, "8": 9, "64": 32}},  # the later of the two
    }}
    faster_from, measured = env_engines.derive_choice(table)
    assert faster_from == {"classic": 1 << 62, "mujoco": 64}
    assert measured == {"mujoco": 3.0}
