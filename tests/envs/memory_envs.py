"""`Cue`: a task only a policy with memory solves (`env.id=tests.envs.memory_envs:Cue`).

The first observation of an episode shows a cue, +1 or -1, in its first entry; every later
observation is [0, 0]. On the last of `length` steps, action 1 pays 1 if the cue was +1 and
action 0 pays 1 if it was -1; nothing else pays. A memoryless policy sees [0, 0] when it must
answer and earns 0.5 per episode on average; one that remembers the cue earns 1.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Cue(gym.Env):
    """See the module docstring."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 3, render_mode: str | None = None):
        self.length, self.render_mode = int(length), render_mode
        self.cue, self.t = 1.0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.cue, self.t = float(self.np_random.choice([-1.0, 1.0])), 0
        return np.array([self.cue, 1.0], dtype=np.float32), {}

    def step(self, action: Any):
        self.t += 1
        done = self.t >= self.length
        reward = float(done and int(action) == (1 if self.cue > 0 else 0))
        return np.zeros(2, dtype=np.float32), reward, done, False, {}
