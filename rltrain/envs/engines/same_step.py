"""`SameStep`: a C++ vector engine that resets ended rows on the next step (EnvPool) seen as a
gymnasium `VectorEnv` in SAME_STEP autoreset mode, which `GymVecEnv` adapts.

After a step in which rows ended, those rows are reset at once (`engine.reset(ids)`): the step
returns their reset observations in `obs` and their true last observations in
`info["final_obs"]` (`info["_final_obs"]` marks them), as gymnasium's SAME_STEP vector envs do.
The engine's own next-step reset never happens (a reset row is no longer done), so every action
the agent sends is an action the env takes: no transition spans a reset, none is dropped.

Seeds are per row: `reset(seed=s)` seeds row i with `s + i` (gymnasium's convention) and
`reset(seed=[s0, s1, ...])` seeds each row with its own value (a seed batch stepping all its
seeds' rows in one engine). EnvPool takes its seeds when it is built, so a reset with other
seeds rebuilds it (~20 ms for 8 MuJoCo envs); a reset without a seed continues each row's RNG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np


def row_seeds(seed: int | Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """The seed of each of `n` rows: `seed + i` for an int, else one given per row."""
    if isinstance(seed, (int, np.integer)):
        return int(seed) + np.arange(n, dtype=np.int64)
    seeds = np.asarray(seed, dtype=np.int64).reshape(-1)
    if len(seeds) != n:
        raise ValueError(f"{len(seeds)} seeds given for {n} envs")
    return seeds


def _row_order(info: dict, count: int) -> np.ndarray | None:
    """The permutation putting an engine's `count` results (all rows, or the rows a partial
    reset returned) in row order, from `info["env_id"]`; None when they already are."""
    ids = np.asarray(info.get("env_id", ()))
    if len(ids) != count or (np.diff(ids) > 0).all():
        return None
    return np.argsort(ids)


class SameStep(gym.vector.VectorEnv):
    """`build(seeds)` makes the engine (a gymnasium-API vector env with next-step autoreset,
    `reset(env_ids)` for some rows, and `info["env_id"]` naming the row of each result);
    `name` says which engine it is in messages."""

    def __init__(self, build: Callable[[np.ndarray], Any], num_envs: int, name: str):
        self._build, self.name = build, name
        self.num_envs = num_envs
        self._seeds = row_seeds(0, num_envs)
        self.engine = build(self._seeds)
        self.single_observation_space = self.engine.observation_space
        self.single_action_space = self.engine.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    capture_problem = property(lambda self: f"{self.name} keeps its envs' state in C++, where "
                                            f"it is not saved")
    """Why `resume=` cannot continue these episodes (`envs/snapshot.py` asks)."""

    def reset(self, *, seed: int | Sequence[int] | None = None,
              options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            seeds = row_seeds(seed, self.num_envs)
            if not np.array_equal(seeds, self._seeds):
                self.engine.close()
                self.engine, self._seeds = self._build(seeds), seeds
        obs, info = self.engine.reset()
        order = _row_order(info, len(obs))
        return (obs if order is None else obs[order]), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray, dict]:
        obs, reward, terminated, truncated, info = self.engine.step(actions)
        order = _row_order(info, self.num_envs)
        if order is not None:
            obs, reward, terminated, truncated = (a[order] for a in
                                                  (obs, reward, terminated, truncated))
        done = np.logical_or(terminated, truncated)
        if not done.any():
            return obs, reward, terminated, truncated, {}
        ended = np.flatnonzero(done)
        final = obs  # the engine's fresh array: the ended rows' true last observations
        obs = obs.copy()
        reset_obs, reset_info = self.engine.reset(ended.astype(np.int32))
        order = _row_order(reset_info, len(reset_obs))
        obs[ended] = reset_obs if order is None else reset_obs[order]
        return obs, reward, terminated, truncated, {"final_obs": final, "_final_obs": done}

    def close(self, **kwargs: Any) -> None:
        self.engine.close()
