"""String helpers for user-facing messages."""

from __future__ import annotations

from rltrain.text import closest


def test_closest_suggests_near_names_or_lists_all_options():
    assert closest("cartpol", ["cartpole", "pendulum"]) == "did you mean cartpole?"
    assert closest("zzz", ["b", "a"]) == "choose one of a, b"
