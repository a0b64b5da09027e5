"""A goal env (gymnasium-robotics' `GoalEnv` contract) for the HER tests:
`rltrain env.id=tests.envs.goal_envs:BitFlipping`.

Bit flipping (Andrychowicz et al. 2017, SB3's `BitFlippingEnv`): `n_bits` bits start random, a
random target is drawn; action i flips bit i. Observations are a Dict of float vectors:
`observation` (the bits), `achieved_goal` (the bits) and `desired_goal` (the target). Reward 0
when the bits equal the target (the episode terminates), else -1; the episode is truncated after
`max_steps` steps (default `n_bits`). With random actions success is rare (~2^-n per step), so
without HER nothing is learned for n >= 8 or so.
`continuous=True`: Box actions in [-1, 1]^n, bit i flips where action i > 0 (SAC, TD3).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class BitFlipping(gym.Env):
    """See the module docstring."""

    def __init__(self, n_bits: int = 8, max_steps: int | None = None, continuous: bool = False):
        self.n, self.max_steps = int(n_bits), int(max_steps or n_bits)
        self.continuous = continuous
        bits = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"observation": bits, "achieved_goal": bits, "desired_goal": bits})
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (self.n,), np.float32) if continuous
                             else gym.spaces.Discrete(self.n))
        self.state = np.zeros(self.n, np.float32)
        self.goal = np.zeros(self.n, np.float32)
        self.t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.state.copy(), "achieved_goal": self.state.copy(),
                "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray,
                       info: Any) -> np.ndarray:
        """0 where the goals are equal, else -1 (vectorized over leading dimensions)."""
        equal = (np.asarray(achieved_goal) == np.asarray(desired_goal)).all(-1)
        return equal.astype(np.float32) - 1.0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, 2, self.n).astype(np.float32)
        self.goal = self.np_random.integers(0, 2, self.n).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any):
        if self.continuous:
            self.state = np.where(np.asarray(action) > 0, 1.0 - self.state,
                                  self.state).astype(np.float32)
        else:
            self.state[int(action)] = 1.0 - self.state[int(action)]
        self.t += 1
        reward = float(self.compute_reward(self.state, self.goal, {}))
        success = reward == 0.0
        return self._obs(), reward, success, self.t >= self.max_steps and not success, {
            "is_success": success}


class SucceedsEveryOther(gym.Env):
    """Episodes of 2 steps whose last step reports `is_success` True for every second episode
    of this env (1st: False, 2nd: True, ...); the first step reports False. `report=False`: no
    `is_success` at all (a plain env). Reward 1 a step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, report: bool = True):
        self.report, self.episodes, self.t = report, 0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any):
        self.t += 1
        ended = self.t == 2
        info = {"is_success": ended and self.episodes % 2 == 1} if self.report else {}
        self.episodes += int(ended)
        return np.zeros(1, np.float32), 1.0, ended, False, info
