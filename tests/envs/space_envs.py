"""Envs with categorical observations, as a user brings them:
`rltrain env.id=tests.envs.space_envs:<Class>`.

Each step shows a random observation and pays for the action that matches it; episodes last
`length` steps. The observation is a `Discrete(n, start=3)`, a `MultiDiscrete([3, 4])` or a
`MultiBinary(3)`; its "answer" is a number in [0, 4) read from it. Discrete actions: pay 1 for
the answer. Box actions (`box=True`): pay -(a - (answer / 1.5 - 1))^2, the answer mapped to
[-1, 1]. An observation outside its space (`bad=True`) tests the adapter's check.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class _Categorical(gym.Env):
    """See the module docstring; subclasses set `observation_space` and `answer`."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, box: bool = False, length: int = 8, bad: bool = False,
                 render_mode: str | None = None):
        self.box, self.length, self.bad, self.render_mode = box, int(length), bad, render_mode
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if box
                             else gym.spaces.Discrete(4))
        self.obs, self.t = self._draw(), 0

    def answer(self, obs: Any) -> int:
        raise NotImplementedError

    def _draw(self) -> Any:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self._draw()
        return self.obs, {}

    def sim_state(self) -> dict[str, Any]:
        """The state protocol (exact resume): the shown observation and the step count; rltrain
        saves `np_random`, which draws the observations."""
        return {"obs": self.obs, "t": self.t}

    def load_sim_state(self, state: dict[str, Any]) -> None:
        self.obs, self.t = state["obs"], int(state["t"])

    def step(self, action):
        target = self.answer(self.obs)
        if self.box:
            reward = -float((float(np.asarray(action).reshape(-1)[0]) - (target / 1.5 - 1)) ** 2)
        else:
            reward = float(int(action) == target)
        self.t += 1
        self.obs = self._draw()
        if self.bad:
            self.obs = np.asarray(self.obs) + 100
        return self.obs, reward, False, self.t >= self.length, {}

    def render(self):
        return np.full((8, 8, 3), 40 * self.answer(self.obs), dtype=np.uint8)


class DiscreteObs(_Categorical):
    """`Discrete(4, start=3)`: the answer is the observation minus 3."""

    observation_space = gym.spaces.Discrete(4, start=3)

    def _draw(self) -> Any:
        return np.int64(3 + self.np_random.integers(4))

    def answer(self, obs: Any) -> int:
        return int(obs) - 3


class MultiDiscreteObs(_Categorical):
    """`MultiDiscrete([3, 4])`: the answer is the second entry (the first is noise)."""

    observation_space = gym.spaces.MultiDiscrete([3, 4])

    def _draw(self) -> Any:
        return self.np_random.integers([3, 4]).astype(np.int64)

    def answer(self, obs: Any) -> int:
        return int(obs[1])


class MultiBinaryObs(_Categorical):
    """`MultiBinary(3)`: the answer is the first two bits as a number (the third is noise)."""

    observation_space = gym.spaces.MultiBinary(3)

    def _draw(self) -> Any:
        return self.np_random.integers(2, size=3).astype(np.int8)

    def answer(self, obs: Any) -> int:
        return int(obs[0]) * 2 + int(obs[1])


class _Targets(gym.Env):
    """Box observations showing one target per action dimension; each dimension of the action
    that hits its target pays 1 / dims. Episodes last `length` steps."""

    metadata = {"render_modes": ["rgb_array"]}
    dims, choices = 3, 2

    def __init__(self, length: int = 8, render_mode: str | None = None):
        self.length, self.render_mode = int(length), render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.dims * self.choices,), np.float32)
        self.target, self.t = np.zeros(self.dims, dtype=np.int64), 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.dims, self.choices), dtype=np.float32)
        obs[np.arange(self.dims), self.target] = 1.0
        return obs.reshape(-1)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.target = self.np_random.integers(self.choices, size=self.dims)
        return self._obs(), {}

    def _hits(self, action: Any) -> np.ndarray:
        raise NotImplementedError

    def step(self, action):
        assert self.action_space.contains(action), f"{action!r} is not in {self.action_space}"
        reward = float(self._hits(action).mean())
        self.t += 1
        self.target = self.np_random.integers(self.choices, size=self.dims)
        return self._obs(), reward, False, self.t >= self.length, {}

    def sim_state(self) -> dict[str, Any]:
        return {"target": self.target, "t": self.t}

    def load_sim_state(self, state: dict[str, Any]) -> None:
        self.target, self.t = state["target"], int(state["t"])

    def render(self):
        return np.full((8, 8, 3), 60 * int(self.target[0]), dtype=np.uint8)


class MultiDiscreteAction(_Targets):
    """`MultiDiscrete([3, 3, 3], start=[1, 1, 1])`: dimension i should say `target[i] + 1`."""

    choices = 3

    def __init__(self, length: int = 8, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.action_space = gym.spaces.MultiDiscrete([3, 3, 3], start=[1, 1, 1])

    def _hits(self, action: Any) -> np.ndarray:
        return np.asarray(action) - 1 == self.target


class DiscreteStartAction(_Targets):
    """`Discrete(3, start=-1)`: the action should be `target[0] - 1` (one dimension, three
    choices); an action outside the space (0-based, say) fails the env's assertion."""

    dims, choices = 1, 3

    def __init__(self, length: int = 8, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.action_space = gym.spaces.Discrete(3, start=-1)

    def _hits(self, action: Any) -> np.ndarray:
        return np.asarray([int(action) + 1 == self.target[0]])


class MultiBinaryAction(_Targets):
    """`MultiBinary(3)`: bit i should equal `target[i]`."""

    def __init__(self, length: int = 8, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.action_space = gym.spaces.MultiBinary(3)

    def _hits(self, action: Any) -> np.ndarray:
        return np.asarray(action) == self.target


class InvalidChoice(RuntimeError):
    """Raised by `MaskedMultiDiscreteAction` when an action picks a masked-out choice."""


class MaskedMultiDiscreteAction(MultiDiscreteAction):
    """`MultiDiscreteAction` with `action_masks()`: per dimension the target and one other
    choice are valid (sb3-contrib's layout: the dimensions' masks side by side); an invalid
    choice raises, so a run that finishes never made one."""

    def _valid(self) -> np.ndarray:
        mask = np.zeros((self.dims, self.choices), dtype=bool)
        mask[np.arange(self.dims), self.target] = True
        mask[np.arange(self.dims), (self.target + 1 + self.t % 2) % self.choices] = True
        return mask

    def action_masks(self) -> np.ndarray:
        return self._valid().reshape(-1)

    def step(self, action):
        chosen = np.asarray(action) - 1
        if not self._valid()[np.arange(self.dims), chosen].all():
            raise InvalidChoice(f"choices {chosen.tolist()} with valid {self._valid().tolist()}")
        return super().step(action)
