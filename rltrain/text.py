"""Small string helpers for user-facing messages (no rltrain imports: any layer may use them)."""

from __future__ import annotations

import difflib


def closest(name: str, options: list[str] | tuple[str, ...]) -> str:
    """`did you mean ...?` text for a mistyped name, or the full list of options."""
    near = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    if near:
        return "did you mean " + " or ".join(near) + "?"
    return "choose one of " + ", ".join(sorted(options))
