"""Envs with invalid actions, as a user brings them: `rltrain env.id=tests.envs.masked_envs:...`.

`PickTarget`: each step shows a target among `n` actions (one-hot observation); a random
`valid` of the `n` actions are allowed, the target always among them. Picking the target pays
1, any other valid action 0. With `strict=True` an invalid action raises, so a run that finishes
took none. Two conventions for telling the agent:
- `PickTarget` has an `action_masks()` method (sb3-contrib's convention);
- `PickTargetInfo` puts the mask in `info["action_mask"]` at reset and every step.
An unmasked agent must learn which of `n` actions is right; a masked one chooses among `valid`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class InvalidAction(RuntimeError):
    """Raised by a strict env when the agent picks an action its mask forbids."""


class _PickTargetBase(gym.Env):
    """See the module docstring; episodes last `length` steps (truncated by a time limit)."""

    def __init__(self, n: int = 8, valid: int = 2, length: int = 10, strict: bool = True,
                 render_mode: str | None = None):
        self.n, self.valid, self.length, self.strict = int(n), int(valid), int(length), strict
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)
        self.action_space = gym.spaces.Discrete(self.n)
        self.render_mode = render_mode
        self._rng = np.random.default_rng()
        self.target, self.mask, self.t = 0, np.ones(self.n, dtype=bool), 0

    def _draw(self) -> np.ndarray:
        self.target = int(self._rng.integers(self.n))
        others = self._rng.permutation([a for a in range(self.n) if a != self.target])
        self.mask = np.zeros(self.n, dtype=bool)
        self.mask[[self.target, *others[: self.valid - 1]]] = True
        obs = np.zeros(self.n, dtype=np.float32)
        obs[self.target] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action: Any):
        action = int(action)
        if self.strict and not self.mask[action]:
            raise InvalidAction(f"action {action} is invalid (valid: {np.flatnonzero(self.mask)})")
        reward = 1.0 if action == self.target else 0.0
        self.t += 1
        obs = self._draw()
        return obs, reward, False, self.t >= self.length, {}


class PickTarget(_PickTargetBase):
    """Tells its valid actions through `action_masks()`."""

    def action_masks(self) -> np.ndarray:
        """The valid actions now (True = valid)."""
        return self.mask.copy()


class PickTargetInfo(_PickTargetBase):
    """Tells its valid actions in `info["action_mask"]` (no method)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {"action_mask": self.mask.copy()}

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"action_mask": self.mask.copy()}


class PickTargetInfoSaved(PickTargetInfo):
    """`PickTargetInfo` with the state protocol (`sim_state` / `load_sim_state`): its episodes
    continue exactly on resume, the mask of its current observation included."""

    def sim_state(self) -> dict[str, Any]:
        return {"target": self.target, "mask": self.mask.copy(), "t": self.t,
                "rng": self._rng.bit_generator.state}

    def load_sim_state(self, state: dict[str, Any]) -> None:
        self.target, self.mask, self.t = int(state["target"]), np.array(state["mask"]), int(state["t"])
        self._rng.bit_generator.state = state["rng"]
