"""Invalid-action masks: where an env says which Discrete (or MultiDiscrete) actions are valid,
and how the loops and evaluation read them.

An env exposes its valid actions in one of two ways (bool, one entry per action, True = valid):
- an `action_masks()` method returning the mask of its current state (the sb3-contrib
  convention), or
- `info["action_mask"]` from `reset()` and `step()` (gymnasium stacks it to `[N, n]`).
The `GymVecEnv` adapter keeps the mask of the current observations and answers
`current_action_mask()`; a native batched env (`VecEnv`) with masks implements that method
itself, returning a bool `[N, n]` tensor. `action_mask(env)` finds it through rltrain's wrappers.
An env that gives neither is unmasked (`None`), and nothing changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltrain.errors import EnvError

MASK_KEY = "action_mask"
MASKABLE = ("discrete", "multi_discrete")
"""Action kinds an env may mask (MultiDiscrete: one bool per choice, dimensions side by side)."""


def action_mask(env: Any) -> torch.Tensor | None:
    """The bool `[N, n]` mask of `env`'s current observations, or None for an unmasked env.

    Walks down `.env` through rltrain's VecEnv wrappers to the adapter that tracks the mask.
    """
    while env is not None:
        current = getattr(env, "current_action_mask", None)
        if callable(current):
            return current()
        env = getattr(env, "env", None)
    return None


def to_mask(values: Any, num_envs: int, segments: tuple[int, ...], name: str,
            device: torch.device, check_rows: bool = True) -> torch.Tensor:
    """Check and convert what an env gave as masks to a bool `[N, sum(segments)]` tensor on
    `device`. `segments`: the choices of each action dimension (`(n,)` for Discrete, a
    MultiDiscrete's nvec: its dimensions' masks side by side); `check_rows`: refuse a row where
    a dimension has no valid choice."""
    width = int(sum(segments))
    try:
        array = np.asarray(values.cpu() if isinstance(values, torch.Tensor) else values)
        mask = torch.as_tensor(array.astype(bool)).reshape(num_envs, width)
    except (TypeError, ValueError, RuntimeError):
        raise EnvError(f"env {name}: its action mask must be one bool per action ({width}) "
                       f"for each of the {num_envs} envs; got shape {np.shape(values)}") from None
    if not check_rows:
        return mask.to(device)
    for dim, part in enumerate(torch.split(mask, list(segments), dim=1)):
        empty = ~part.any(dim=1)
        if empty.any():
            row = int(torch.nonzero(empty)[0])
            where = f" for action dimension {dim}" if len(segments) > 1 else ""
            raise EnvError(f"env {name}: its action mask allows no action{where} in row {row}; "
                           f"at least one action must be valid in every state")
    return mask.to(device)
