"""A user's env module, as `rltrain env.id=tests.envs.my_envs:...` imports it in the tests.

- `Corridor`: a gymnasium env registered as `Corridor-v0` when this module is imported;
- `make_corridor`: a per-env factory returning a `Corridor`;
- `CorridorVecEnv` / `make_vec_corridor`: the same corridor as a native batched torch `VecEnv`
  (a class and a factory with `num_envs`), with `reward_components` and `log` infos;
- `RewardOffset`: a wrapper of one's own (`{name: tests.envs.my_envs:RewardOffset}`);
- `make_nothing`: a factory that returns no env (error tests).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rltrain.types import EnvSpec, StepResult

CORRIDOR_ID = "Corridor-v0"
GOAL_REWARD, STEP_COST = 1.0, -0.1


class Corridor(gym.Env):
    """Walk right from cell 0 to cell `length`: action 1 steps right, 0 steps left (not below 0).

    Observation `[position / length, 1]`; reward `GOAL_REWARD` on reaching the goal (which
    terminates), `STEP_COST` for every other step. The shortest episode is `length` steps.
    """

    observation_space = gym.spaces.Box(-1.0, 2.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 4, render_mode: str | None = None):
        self.length, self.render_mode, self.pos = int(length), render_mode, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.pos / self.length, 1.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        done = self.pos >= self.length
        return self._obs(), GOAL_REWARD if done else STEP_COST, done, False, {}


def make_corridor(length: int = 4, render_mode: str | None = None) -> Corridor:
    """A per-env factory (no `num_envs` parameter): called once per env."""
    return Corridor(length, render_mode)


class CorridorVecEnv:
    """`Corridor` as a native batched torch env: the `VecEnv` contract without gymnasium.

    Episodes also end by truncation after `horizon` steps. `info["reward_components"]` splits the
    reward into `goal` and `step_cost`; `info["log"]["position"]` is every row's position.
    """

    built: list[dict[str, Any]] = []
    """The arguments of every construction (tests check what rltrain passed)."""

    def __init__(self, num_envs: int, device: torch.device, length: int = 4, horizon: int = 20):
        CorridorVecEnv.built.append({"num_envs": num_envs, "device": device, "length": length,
                                     "horizon": horizon})
        self.spec = EnvSpec((2,), "discrete", 2, num_envs)
        self.device = torch.device(device)
        self.length, self.horizon = length, horizon
        self.pos = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.t = torch.zeros_like(self.pos)
        self.ret = torch.zeros(num_envs, dtype=torch.float64, device=self.device)

    def _obs(self, pos: torch.Tensor) -> torch.Tensor:
        return torch.stack((pos.float() / self.length, torch.ones_like(pos, dtype=torch.float32)), 1)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.pos.zero_(), self.t.zero_(), self.ret.zero_()
        return self._obs(self.pos)

    def step(self, action: torch.Tensor) -> StepResult:
        pos = (self.pos + torch.where(action == 1, 1, -1)).clamp(min=0)
        self.t += 1
        terminated = pos >= self.length
        truncated = (self.t >= self.horizon) & ~terminated
        goal = terminated.float() * GOAL_REWARD
        cost = (~terminated).float() * STEP_COST
        reward = goal + cost
        self.ret += reward
        done = terminated | truncated
        info: dict[str, Any] = {"reward_components": {"goal": goal, "step_cost": cost},
                                "log": {"position": pos.float()}}
        if done.any():
            index = done.nonzero().squeeze(1)
            info["episode"] = {"index": index.cpu().numpy(), "return": self.ret[index].cpu().numpy(),
                               "length": self.t[index].cpu().numpy(),
                               "terminated": int(terminated.sum()), "truncated": int(truncated.sum())}
        final_obs = self._obs(pos)
        self.pos = torch.where(done, 0, pos)
        self.t.masked_fill_(done, 0)
        self.ret.masked_fill_(done, 0.0)
        return StepResult(self._obs(self.pos), reward, terminated, truncated, final_obs, info)

    def close(self) -> None:
        pass


class CorruptingCorridorVecEnv(CorridorVecEnv):
    """`CorridorVecEnv` whose step number `at` (counted from 1, over resets) returns a NaN in
    row 1's observation (`what="obs"`) or an inf reward in row 1 (`what="reward"`): a fault
    that only a check of every step, not of the first, can catch."""

    def __init__(self, num_envs: int, device: torch.device, at: int = 5, what: str = "obs"):
        super().__init__(num_envs, device)
        self.at, self.what, self.steps = at, what, 0

    def step(self, action: torch.Tensor) -> StepResult:
        res = super().step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.what == "obs":
                res.obs[1, 0] = float("nan")
            else:
                res.reward[1] = float("inf")
        return res


def make_vec_corridor(num_envs: int, device: torch.device, length: int = 4) -> CorridorVecEnv:
    """A batched factory (it has `num_envs`): called once for the whole batch."""
    return CorridorVecEnv(num_envs, device, length=length)


class RewardOffset(gym.RewardWrapper):
    """Adds `offset` to every reward (a wrapper of one's own, named as `module:Class`)."""

    def __init__(self, env: gym.Env, offset: float = 0.0):
        super().__init__(env)
        self.offset = offset

    def reward(self, reward: float) -> float:
        return reward + self.offset


def make_nothing() -> int:
    """A factory that returns something that is not an env."""
    return 3


if CORRIDOR_ID not in gym.registry:  # importing this module registers the id (once)
    gym.register(id=CORRIDOR_ID, entry_point=Corridor, max_episode_steps=50)
