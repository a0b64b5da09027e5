"""MuJoCo's warnings as `rltrain` log records, each kind once per process.

MuJoCo prints its warnings from C straight to the process's stderr, past Python's warning filters
and past the console that owns the terminal during a run: gymnasium's MuJoCo models under mujoco
4.x printed "compiler attribute 'settotalmass' is deprecated ..." once for every env built (six
blocks in a HalfCheetah run, around the progress bar). MuJoCo lets a program take its warnings
(`mujoco.set_mju_user_warning`); here they become one log line per kind.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("rltrain")

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_seen: set[str] = set()


def route_mujoco_warnings() -> None:
    """Log MuJoCo's warnings from now on (see the module docstring), unless a handler is set
    already: this one, or the user's own, which is left as it is."""
    # optional extra: MuJoCo, for its envs only (`pip install "rltrain[mujoco]"`)
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(log_mujoco_warning)


def log_mujoco_warning(message: str) -> None:
    """One WARNING record per kind of message: messages that differ only in their numbers (the
    DOF and time of an unstable simulation) are one kind, logged the first time."""
    text = str(message).strip()
    kind = _NUMBER.sub("#", text)
    if kind in _seen:
        return
    _seen.add(kind)
    log.warning("MuJoCo: %s (each kind of MuJoCo warning is logged once)", text)
