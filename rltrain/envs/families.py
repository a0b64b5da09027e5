"""Env families that need an optional extra: which ids belong to which, and their extras.

`family_of(env_id)` is the one place that says an id is Atari (ALE), MuJoCo or Box2D; the
preprocessing (`envs/atari.py`), the on-demand registration of ALE ids and the one-line
"install rltrain[<extra>]" messages all ask it.
"""

from __future__ import annotations

MUJOCO_NAMES = frozenset({
    "Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
    "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d",
})
BOX2D_NAMES = frozenset({
    "BipedalWalker", "BipedalWalkerHardcore", "CarRacing", "LunarLander", "LunarLanderContinuous",
})


def family_of(env_id: str) -> str | None:
    """"atari" (`ALE/<Game>-v5`), "mujoco", "box2d", or None for every other id."""
    if env_id.startswith("ALE/"):
        return "atari"
    name = env_id.rpartition("/")[2].rsplit("-v", 1)[0]
    if name in MUJOCO_NAMES:
        return "mujoco"
    if name in BOX2D_NAMES:
        return "box2d"
    return None
