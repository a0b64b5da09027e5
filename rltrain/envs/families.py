"""Env families that need an optional extra: which ids belong to which, and their extras.

`family_of(env_id)` is the one place that says an id is Atari (ALE), MuJoCo or Box2D; the
preprocessing (`envs/atari.py`), the on-demand registration of ALE ids and the one-line
"install rltrain[<extra>]" messages all ask it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rltrain.errors import UserError
from rltrain.text import first_line

MUJOCO_NAMES = frozenset({
    "Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
    "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d",
})
BOX2D_NAMES = frozenset({
    "BipedalWalker", "BipedalWalkerHardcore", "CarRacing", "LunarLander", "LunarLanderContinuous",
})

# gymnasium-robotics' goal envs (Fetch, Shadow hand, mazes) and its other MuJoCo tasks
ROBOTICS_PREFIXES = ("Fetch", "HandReach", "HandManipulate", "PointMaze", "AntMaze",
                     "AdroitHand", "FrankaKitchen")


def family_of(env_id: str) -> str | None:
    """"atari" (`ALE/<Game>-v5`), "mujoco", "box2d", "robotics" (gymnasium-robotics' ids:
    `FetchReach-v4`, `PointMaze_UMaze-v3`, ...), or None for every other id."""
    if env_id.startswith("ALE/"):
        return "atari"
    name = env_id.rpartition("/")[2].rsplit("-v", 1)[0]
    if name.startswith(ROBOTICS_PREFIXES):
        return "robotics"
    if name in MUJOCO_NAMES:
        return "mujoco"
    if name in BOX2D_NAMES:
        return "box2d"
    return None


_LEGACY_ATARI = re.compile(r"([A-Z]\w*?)(?:NoFrameskip|Deterministic)?-v[04]")


def modern_atari_id(env_id: str) -> str | None:
    """`ALE/<Game>-v5` for one of ale-py's legacy Atari ids (`PongNoFrameskip-v4`, `Breakout-v0`,
    also `ALE/Pong-v4`), else None (None too without ale-py, which knows the games)."""
    m = _LEGACY_ATARI.fullmatch(env_id.removeprefix("ALE/"))
    if m is None:
        return None
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", m.group(1)).lower()  # SpaceInvaders: space_invaders
    return f"ALE/{m.group(1)}-v5" if snake in _ale_games() else None


@functools.cache
def _ale_games() -> frozenset[str]:
    """ale-py's game names (`space_invaders`), from its ROM files: found, not imported (an
    import takes most of a second and registers every Atari id); empty without ale-py."""
    try:
        spec = importlib.util.find_spec("ale_py")
    except (ImportError, ValueError):
        return frozenset()
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    roms = Path(next(iter(spec.submodule_search_locations))) / "roms"
    return frozenset(p.stem for p in roms.glob("*.bin"))


def legacy_atari_hint(env_id: str) -> str | None:
    """What to use instead of a legacy Atari id (see `modern_atari_id`), else None."""
    modern = modern_atari_id(env_id)
    return None if modern is None else (f"ale-py's legacy Atari ids are not used; rltrain trains "
                                        f"the v5 ids, with its Atari preprocessing: env={modern}")


def without_legacy_atari(ids: Iterable[str]) -> list[str]:
    """`ids` less the legacy Atari ones (which a past `import ale_py` registered): the ids to
    suggest for an unknown one."""
    return [k for k in list(ids) if modern_atari_id(k) is None]


# family -> (what it is called, the pip extra, the modules it needs)
EXTRAS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "atari": ("Atari (ale-py and opencv)", "atari", ("ale_py", "cv2")),
    "mujoco": ("MuJoCo", "mujoco", ("mujoco",)),
    "box2d": ("Box2D", "box2d", ("Box2D",)),
    "robotics": ("gymnasium-robotics", "robotics", ("gymnasium_robotics",)),
}

ROBOTICS_MUJOCO_FIXED = (1, 4, 3)
"""gymnasium-robotics releases before this one compare `model.jnt_type` (numpy ints) with
mujoco's joint-type enums, which stopped comparing equal in mujoco 3.12: their Fetch and hand
envs fail to build with an AssertionError (measured here: mujoco 3.11.0 builds FetchReach-v4
with gymnasium-robotics 1.4.2, 3.12.0 and later do not)."""


def _version(dist: str) -> tuple[int, ...]:
    """The installed version of `dist` as numbers (`3.11.0` -> (3, 11, 0)); () when unknown."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version(dist)
    except PackageNotFoundError:
        return ()
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def check_robotics_mujoco(env_id: str) -> None:
    """One line, before the env fails to build, where the installed gymnasium-robotics and
    mujoco cannot build each other's models (see `ROBOTICS_MUJOCO_FIXED`)."""
    robotics, mujoco = _version("gymnasium-robotics"), _version("mujoco")
    if robotics and robotics < ROBOTICS_MUJOCO_FIXED and mujoco >= (3, 12):
        have = ".".join(map(str, robotics))
        raise UserError(f"{env_id}: gymnasium-robotics {have} cannot build its MuJoCo models "
                        f"with mujoco {'.'.join(map(str, mujoco))}: pip install \"mujoco<3.12\" "
                        f"(rltrain[robotics] pins it)")


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
        except Exception as exc:  # installed, but its import fails (MUJOCO_GL without its library)
            gl = os.environ.get("MUJOCO_GL")
            hint = (f" (MUJOCO_GL={gl}: is its OpenGL library installed? unset it, or try "
                    f"MUJOCO_GL=egl)" if module == "mujoco" and gl else "")
            raise UserError(f"{env_id}: importing {module} failed: {type(exc).__name__}: "
                            f"{first_line(exc)}{hint}") from exc


def register_on_demand(env_id: str) -> None:
    """Make `env_id` known to gymnasium when it is registered on demand: the `ALE/` ids exist
    once `ale_py` is registered, which happens here, only when such an id is used (importing
    ale-py takes most of a second; a missing extra is one line naming it), and the velocity-
    masked `*NoVel-*` ids (`envs/no_velocity.py`) are registered when named."""
    # start-up: gymnasium only to register an id (`rltrain list` imports this module)
    import gymnasium as gym

    if family_of(env_id) == "atari":
        require_extra(env_id)
        # start-up: ale_py (most of a second) only for ALE ids; optional extra
        import ale_py

        # its banner on every command (and before a one-line error): warnings and errors only
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
        if env_id not in gym.registry:
            gym.register_envs(ale_py)
        return
    if family_of(env_id) == "robotics":
        register_robotics(env_id, gym)
        return
    if env_id in gym.registry:
        return
    # start-up: gymnasium only to register an id (`rltrain list` imports this module)
    from rltrain.envs.no_velocity import NO_VELOCITY, register_no_velocity

    if env_id in NO_VELOCITY:
        register_no_velocity(env_id)


def register_robotics(env_id: str, gym: Any) -> None:
    """Import gymnasium-robotics (one line naming the extra when it is missing, or when its
    mujoco cannot build its models) and register its ids. Its import prints a notice on the
    Adroit hand envs' rewards to stderr whatever the id: that goes to the debug log instead."""
    import contextlib
    import io
    import logging
    import sys

    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        require_extra(env_id)  # imports gymnasium_robotics
    if said.getvalue().strip():
        logging.getLogger("rltrain").debug("gymnasium-robotics: %s", said.getvalue().strip())
    check_robotics_mujoco(env_id)
    if env_id not in gym.registry:
        gym.register_envs(sys.modules["gymnasium_robotics"])
