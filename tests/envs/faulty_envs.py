"""Envs that misbehave on purpose, as a user's buggy env would (`env.id=tests.envs.faulty_envs:...`).

`make_faulty(fault=..., at=k)` builds a `Faulty` env that behaves for `k` steps of each env (its
step counter survives resets), then commits its fault on every later call:
`raise_step`, `raise_reset`, `wrong_shape`, `nan_reward`, `inf_reward`, `none_reward` (a
reward of None), `nan_obs`, `inf_obs`. With `only_seed=s`, only the env first reset with seed `s` misbehaves.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

FAULTS = ("raise_step", "raise_reset", "wrong_shape", "nan_reward", "inf_reward", "none_reward",
          "nan_obs", "inf_obs")


class Faulty(gym.Env):
    """A two-action corridor of 10 steps whose fault starts after `at` steps in all."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fault: str = "raise_step", at: int = 0, render_mode: str | None = None,
                 only_seed: int | None = None):
        assert fault in FAULTS, fault
        self.fault, self.at, self.render_mode = fault, int(at), render_mode
        self.steps, self.t = 0, 0
        self.only_seed, self.first_seed = only_seed, None

    def _obs(self) -> np.ndarray:
        obs = np.array([self.t / 10.0, 1.0], dtype=np.float32)
        if self.steps > self.at and self.fault in ("nan_obs", "inf_obs"):
            obs[0] = np.nan if self.fault == "nan_obs" else np.inf
        if self.steps > self.at and self.fault == "wrong_shape":
            return np.zeros(3, dtype=np.float32)
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self.first_seed is None and seed is not None:
            self.first_seed = seed
        if self.only_seed is not None and self.first_seed != self.only_seed:
            self.at = 1 << 62  # another env's seed: this one behaves
        if self.steps > self.at and self.fault == "raise_reset":
            raise RuntimeError("the simulator lost its connection")
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self.steps > self.at and self.fault == "raise_step":
            raise RuntimeError(f"the simulator exploded at its step {self.steps}")
        reward = 1.0
        if self.steps > self.at and self.fault in ("nan_reward", "inf_reward", "none_reward"):
            reward = {"nan_reward": float("nan"), "inf_reward": float("inf")}.get(self.fault)
        return self._obs(), reward, self.t >= 10, False, {}


def make_faulty(fault: str = "raise_step", at: int = 0, render_mode: str | None = None,
                only_seed: int | None = None) -> Faulty:
    """A per-env factory of `Faulty`."""
    return Faulty(fault, at, render_mode, only_seed)
