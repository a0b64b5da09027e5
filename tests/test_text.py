"""String helpers for user-facing messages."""

from __future__ import annotations

import pytest

from rltrain.text import closest, dotted, duration, plural


def test_closest_suggests_near_names_or_lists_all_options():
    assert closest("cartpol", ["cartpole", "pendulum"]) == "did you mean cartpole?"
    assert closest("zzz", ["b", "a"]) == "choose one of a, b"


def test_closest_lists_twenty_of_a_long_list_and_counts_the_rest():
    """An unknown env id with nothing close listed all ~100 registered ids in one line."""
    options = [f"Env{k:03d}-v0" for k in range(95)]
    text = closest("zzz", options)
    assert text.startswith("choose one of Env000-v0, Env001-v0, ") and text.endswith(
        "Env019-v0 and 75 more")


def test_plural_counts_with_separators_and_the_right_noun():
    assert plural(1, "env") == "1 env"
    assert plural(8, "env") == "8 envs"
    assert plural(0, "episode") == "0 episodes"
    assert plural(12288, "step") == "12,288 steps"


@pytest.mark.parametrize("seconds, text", [
    (0.2, "0 s"), (42.4, "42 s"), (59.4, "59 s"), (59.6, "0:01:00"), (61, "0:01:01"),
    (3599.6, "1:00:00"), (7384, "2:03:04"), (float("nan"), "?"), (float("inf"), "?"),
])
def test_duration_is_seconds_under_a_minute_then_h_mm_ss(seconds, text):
    assert duration(seconds) == text


def test_dotted_flattens_nested_sections_to_dotted_keys():
    assert dotted({"algo": {"lr": 0.1, "net": {"hidden": [8]}}, "seed": 0}) == {
        "algo.lr": 0.1, "algo.net.hidden": [8], "seed": 0}
