"""What rltrain makes of a gymnasium action space: its kind and size (`describe_action_space`)
and, for a MultiDiscrete space, its choices per dimension (`action_nvec`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rltrain.errors import UserError


def describe_action_space(space: gym.Space) -> tuple[str, int]:
    """("discrete", n), ("box", dim), ("multi_discrete", dims) or ("multi_binary", n) for the
    action spaces rltrain supports (`action_nvec` gives a MultiDiscrete's choices)."""
    if isinstance(space, gym.spaces.Discrete):
        return "discrete", int(space.n)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return "box", int(space.shape[0])
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        return "multi_discrete", len(space.nvec)
    if isinstance(space, gym.spaces.MultiBinary) and len(np.shape(space.n)) <= 1:
        return "multi_binary", int(np.prod(space.n))
    raise UserError(f"unsupported action space {space}: rltrain handles Discrete, 1-D Box, "
                    f"1-D MultiDiscrete and 1-D MultiBinary actions")


def action_nvec(space: gym.Space) -> tuple[int, ...]:
    """The choices per dimension of a MultiDiscrete action space; () for any other."""
    return tuple(int(n) for n in space.nvec) if isinstance(space, gym.spaces.MultiDiscrete) else ()
