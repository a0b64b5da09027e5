"""User envs whose state lives in numpy values of every numeric dtype, for checkpoint tests.

- `DriftEnv`: a point drifting on a line; besides its position it keeps, in every numeric
  dtype, a numpy scalar, a 0-d array and a 1-d array that change every step and feed the
  observation. It offers the state protocol (`sim_state()` / `load_sim_state()`), returning
  those numpy values as they are, so a resume is exact only if they come back with their dtypes.
- `OpaqueDriftEnv`: the same without the protocol: rltrain cannot know its state.
- `DtypeWrapper`: a wrapper of one's own holding numpy attributes of every dtype (captured
  attribute by attribute, no protocol needed).

`register()` registers them as `rltrain_test/Drift-v0` and `rltrain_test/OpaqueDrift-v0`.
"""

from __future__ import annotations

import collections
from typing import Any

import gymnasium as gym
import numpy as np

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64")
DRIFT_ID, OPAQUE_ID = "rltrain_test/Drift-v0", "rltrain_test/OpaqueDrift-v0"


def register() -> None:
    """Register both envs (once per process)."""
    for env_id, cls in ((DRIFT_ID, DriftEnv), (OPAQUE_ID, OpaqueDriftEnv)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=cls, max_episode_steps=40)


def typed(dtype: str, k: int) -> np.generic:
    """`k` (mod a small range that every dtype holds) as a numpy scalar of `dtype`."""
    return np.dtype(dtype).type(k % 2 if dtype == "bool" else k % 50)


class _Drift(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode: str | None = None):
        self.render_mode = render_mode
        self._fill(0)
        self.pos = np.float64(0.0)

    def _fill(self, k: int) -> None:
        for d in DTYPES:
            setattr(self, f"s_{d}", typed(d, k))
            setattr(self, f"z_{d}", np.array(typed(d, k + 1)))
            setattr(self, f"v_{d}", np.array([typed(d, k + i) for i in range(3)]))

    def _obs(self) -> np.ndarray:
        total = sum(float(getattr(self, f"v_{d}").astype(np.float64).sum()) for d in DTYPES)
        return np.array([self.pos, total / 100.0, float(self.z_uint64) / 50.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = np.float64(self.np_random.uniform(-0.5, 0.5))
        self._fill(int(self.np_random.integers(0, 50)))
        return self._obs(), {}

    def step(self, action: Any):
        k = int(self.s_int64) + 1 + int(action)
        self._fill(k)
        self.pos = np.float64(self.pos + (0.1 if int(action) == 1 else -0.1)
                              + self.np_random.normal(0.0, 0.05))
        done = bool(abs(self.pos) > 1.0)
        return self._obs(), -abs(float(self.pos)), done, False, {}


class OpaqueDriftEnv(_Drift):
    """`DriftEnv` without the state protocol."""


class DriftEnv(_Drift):
    """A point drifting on a line, with numpy state of every dtype and the state protocol."""

    def sim_state(self) -> dict[str, Any]:
        """Every numpy value of the state, as it is (rltrain keeps the dtypes)."""
        names = ["pos"] + [f"{p}_{d}" for p in "szv" for d in DTYPES]
        return {n: getattr(self, n) for n in names}

    def load_sim_state(self, state: dict[str, Any]) -> None:
        """Take `sim_state()` back; the dtypes must be the saved ones."""
        for name, value in state.items():
            old = getattr(self, name)
            assert type(value) is type(old) and value.dtype == old.dtype, (name, value)
            assert np.shape(value) == np.shape(old), name
            setattr(self, name, value)


class DequeStateEnv(DriftEnv):
    """`DriftEnv` whose `sim_state()` holds a deque of recent actions: no checkpoint can."""

    def sim_state(self) -> dict[str, Any]:
        return {**super().sim_state(), "recent": collections.deque([0, 1], maxlen=3)}


class RaisingStateEnv(DriftEnv):
    """`DriftEnv` whose `sim_state()` raises (a bug in the user's state code)."""

    def sim_state(self) -> dict[str, Any]:
        raise KeyError("position")


class DtypeWrapper(gym.Wrapper):
    """Keeps a numpy scalar, 0-d and 1-d array of every dtype, stepped along with the env."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.k = 0
        self._fill()

    def _fill(self) -> None:
        for d in DTYPES:
            setattr(self, f"ws_{d}", typed(d, self.k))
            setattr(self, f"wz_{d}", np.array(typed(d, self.k + 1)))
            setattr(self, f"wv_{d}", np.array([typed(d, self.k + i) for i in range(2)]))

    def step(self, action: Any):
        self.k += 1
        self._fill()
        return self.env.step(action)
