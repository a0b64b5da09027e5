"""Env families that need an optional extra: which ids belong to which, and their extras.

`family_of(env_id)` is the one place that says an id is Atari (ALE), MuJoCo or Box2D; the
preprocessing (`envs/atari.py`), the on-demand registration of ALE ids and the one-line
"install rltrain[<extra>]" messages all ask it.
"""

from __future__ import annotations

import importlib

from rltrain.errors import UserError

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


# family -> (what it is called, the pip extra, the modules it needs)
EXTRAS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "atari": ("Atari (ale-py and opencv)", "atari", ("ale_py", "cv2")),
    "mujoco": ("MuJoCo", "mujoco", ("mujoco",)),
    "box2d": ("Box2D", "box2d", ("Box2D",)),
}


def require_extra(env_id: str) -> None:
    """Raise one line naming the pip extra when a module the family of `env_id` needs is missing:
    `HalfCheetah-v5 needs MuJoCo: pip install "rltrain[mujoco]"`. Other ids need nothing."""
    family = family_of(env_id)
    if family is None:
        return
    what, extra, modules = EXTRAS[family]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UserError(f'{env_id} needs {what}: pip install "rltrain[{extra}]"') from exc


def register_on_demand(env_id: str) -> None:
    """Make `env_id` known to gymnasium when it is registered on demand: the `ALE/` ids exist
    once `ale_py` is registered, which happens here, only when such an id is used (importing
    ale-py takes most of a second; a missing extra is one line naming it), and the velocity-
    masked `*NoVel-*` ids (`envs/no_velocity.py`) are registered when named."""
    import gymnasium as gym

    if env_id in gym.registry:
        return
    from rltrain.envs.no_velocity import NO_VELOCITY, register_no_velocity

    if env_id in NO_VELOCITY:
        register_no_velocity(env_id)
        return
    if family_of(env_id) != "atari":
        return
    require_extra(env_id)
    import ale_py

    gym.register_envs(ale_py)
