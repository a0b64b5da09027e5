"""Velocity-masked classic-control envs for partial-observability checks, as RL-Zoo registers
them: the velocity entries of the observation are zeroed (the shape stays), so a policy without
memory (recurrence or `env.frame_stack`) cannot tell which way the system moves.

| id | base | zeroed observation entries |
|---|---|---|
| `CartPoleNoVel-v1` | `CartPole-v1` | cart velocity (1), pole angular velocity (3) |
| `PendulumNoVel-v1` | `Pendulum-v1` | angular velocity (2) |
| `MountainCarContinuousNoVel-v0` | `MountainCarContinuous-v0` | car velocity (1) |

They are registered with gymnasium on demand (`envs/families.register_on_demand`), the first
time a command line names one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

NO_VELOCITY: dict[str, tuple[str, tuple[int, ...]]] = {
    "CartPoleNoVel-v1": ("CartPole-v1", (1, 3)),
    "PendulumNoVel-v1": ("Pendulum-v1", (2,)),
    "MountainCarContinuousNoVel-v0": ("MountainCarContinuous-v0", (1,)),
}
"""id -> (the base gymnasium id, the observation indices that are velocities)."""


class MaskVelocity(gym.ObservationWrapper):
    """Zero the observation entries at `indices`; the space keeps its bounds (0 lies within
    them, and a dimension with low == high would make gymnasium's checker warn)."""

    def __init__(self, env: gym.Env, indices: tuple[int, ...]):
        super().__init__(env)
        self.mask = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
        self.mask[list(indices)] = 0

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation * self.mask


def make_no_velocity(base_id: str, indices: tuple[int, ...], **kwargs: Any) -> gym.Env:
    """The base env (its own time limit included) with its velocities zeroed."""
    return MaskVelocity(gym.make(base_id, **kwargs), tuple(indices))


def register_no_velocity(env_id: str) -> None:
    """Register `env_id` (a key of `NO_VELOCITY`) with gymnasium, once."""
    if env_id in gym.registry:
        return
    base_id, indices = NO_VELOCITY[env_id]
    gym.register(env_id, entry_point=make_no_velocity,
                 kwargs={"base_id": base_id, "indices": indices})
