"""A user env whose Box observation space is wrong: `rltrain
env.id=tests.envs.bounds_envs:make_off_bounds`. Declared in [-1, 1]^3; dimension 0 overshoots
a little (1.0001, round-off), dimension 1 shows `value` (far out at 10: beyond the bound by more
than the width 2), dimension 2 stays inside. Discrete(2) actions, reward 1, 16-step episodes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class OffBounds(gym.Env):
    """See the module docstring."""

    def __init__(self, value: float = 10.0, length: int = 16):
        self.value, self.length, self.t = float(value), int(length), 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self) -> np.ndarray:
        return np.array([1.0001, self.value, 0.5 * np.sin(self.t)], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, self.t >= self.length, {}


def make_off_bounds(value: float = 10.0, length: int = 16) -> gym.Env:
    """The factory a user names on the command line."""
    return OffBounds(value, length)
