"""The loop profile's bookkeeping (benchmarks/loop_profile.py): a real run of each case's loop,
its calls counted and its parts adding up to the profiled loop. A few seconds of training."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import loop_profile  # noqa: E402


@pytest.mark.parametrize("case", ["dqn:CartPole-v1", "sac:Pendulum-v1 normalized"])
def test_a_profiled_loop_is_taken_apart_into_parts_that_add_up(case):
    got = loop_profile.one(case, 400, profiled=True)
    assert got["us_per_step"] > 0 and 50 < got["calls_per_step"] < 2000
    share = got["profiled_share"]
    # the named parts cover the loop, nothing counted twice (an update's share is one step)
    assert 0.8 < sum(share.values()) <= 1.0 + 1e-9, share
    assert all(v >= 0 for v in share.values()), share
    normalized = share[loop_profile.NORMALIZERS]
    assert (normalized > 0.02) if "normalized" in case else (normalized < 0.02), share


def test_the_table_names_every_code_and_case():
    r = {"calls_per_step": 300.0, "profiled_share": {p: 0.1 for p in loop_profile.PARTS},
         "us_per_step": [200.0, 210.0, 190.0]}
    text = loop_profile.markdown({"dqn:CartPole-v1": {"this checkout": r, "/tmp/before": r}}, 10)
    assert "| dqn:CartPole-v1 | /tmp/before | 300 | 200.0 [200.0, 210.0, 190.0] | - |" in text
    cpu = {**r, "cpu_us_per_step": [150.0, 140.0, 160.0]}
    text = loop_profile.markdown({"dqn:CartPole-v1": {"this checkout": cpu}}, 10, "two jobs")
    assert "| 200.0 [200.0, 210.0, 190.0] | 150.0 [150.0, 140.0, 160.0] |" in text
    assert "The machine: two jobs" in text


def test_a_report_makes_its_out_folder(tmp_path, capsys):
    """`--out` naming a folder not made yet: the tables are written, not lost at the end."""
    from results_io import report

    out = tmp_path / "new" / "folder"
    report("x", {"a": 1}, "| table |", out)
    assert (out / "x.md").read_text() == "| table |" and (out / "x.json").exists()
    assert "| table |" in capsys.readouterr().out
