"""Small string helpers for user-facing messages (no rltrain imports: any layer may use them)."""

from __future__ import annotations

import difflib

LISTED = 20
"""Options a refusal lists at most when none is close (an unknown env id had ~100)."""


def closest(name: str, options: list[str] | tuple[str, ...]) -> str:
    """`did you mean ...?` text for a mistyped name, or the options (the first `LISTED` of a
    long list, and how many more)."""
    near = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    if near:
        return "did you mean " + " or ".join(near) + "?"
    ordered = sorted(options)
    if len(ordered) <= LISTED:
        return "choose one of " + ", ".join(ordered)
    return f"choose one of {', '.join(ordered[:LISTED])} and {len(ordered) - LISTED} more"


def plural(count: int, noun: str) -> str:
    """`1 env`, `8 envs`, `12,288 steps`: a count with thousands separators and the right noun."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def duration(seconds: float) -> str:
    """`42 s` under a minute, `h:mm:ss` from there on, `?` when unknown (NaN or infinite)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "?"
    if seconds < 59.5:
        return f"{max(0.0, seconds):.0f} s"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def dotted(tree: dict, prefix: str = "") -> dict:
    """A nested dict flattened to dotted keys: `{"algo": {"lr": 3e-4}}` -> `{"algo.lr": 3e-4}`."""
    out: dict = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none): the part of
    an error from user or library code that a one-line message quotes."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
