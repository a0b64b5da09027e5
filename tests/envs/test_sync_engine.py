"""`SyncSameStep` (envs/engines/sync.py) against gymnasium's `SyncVectorEnv`: the same seeds and
actions give the same observations, rewards, flags and infos, step for step, through episode
ends (terminations, time limits), info keys that come and go, and spaces it leaves to
gymnasium's own step."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rltrain.envs.engines.sync import SyncSameStep
from tests.envs.dict_envs import CueTask
from tests.envs.space_envs import DiscreteObs, DiscreteStartAction, MultiBinaryAction


class Chatty(gym.Env):
    """Ends at random (terminated or truncated), with infos of every type, some only now and then."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, {"start": 1, "nested": {"depth": 0.5}}

    def step(self, action: np.ndarray) -> tuple:
        u = float(self.np_random.random())
        info: dict[str, Any] = {"u": u, "flag": u > 0.5, "vec": np.full(2, u, np.float32)}
        if u < 0.3:
            info["rare"] = "text"
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, u + float(action.sum()), u > 0.9, 0.8 < u <= 0.9, info


CASES = {
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
    "Pendulum-v1 (time limit 20)": lambda: gym.make("Pendulum-v1", max_episode_steps=20),
    "infos": Chatty,
    "Discrete obs": DiscreteObs,
    "Discrete(start) action": DiscreteStartAction,
    "MultiBinary action": MultiBinaryAction,
    "Dict obs (gymnasium's step)": CueTask,
}


def same(a: Any, b: Any, where: str) -> None:
    """Equal values, keys, dtypes and shapes, down through dicts and object arrays."""
    assert type(a) is type(b), where
    if isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                same(x, y, f"{where}[{i}]")
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", [1, 3])
def test_steps_as_gymnasium(case: str, n: int) -> None:
    ours = SyncSameStep([CASES[case]] * n)
    theirs = SyncVectorEnv([CASES[case]] * n, autoreset_mode=AutoresetMode.SAME_STEP)
    ours.action_space.seed(5)
    same(ours.reset(seed=7), theirs.reset(seed=7), "reset")
    ended, kept = 0, []
    for t in range(120):
        action = ours.action_space.sample()
        got, want = ours.step(action), theirs.step(action)
        same(got, want, f"step {t}")
        ended += int((got[2] | got[3]).sum())
        kept.append((got[0], want[0]))
    assert ended > 0, "no episode ended: the test saw no autoreset"
    for t, (got, want) in enumerate(kept):  # what a step handed out is never written over
        same(got, want, f"kept obs {t}")
    same(ours._autoreset_envs, theirs._autoreset_envs, "autoreset flags")


def test_short_step_only_where_the_spaces_allow() -> None:
    assert SyncSameStep([lambda: gym.make("CartPole-v1")])._short
    assert not SyncSameStep([CueTask])._short
    assert not SyncSameStep([lambda: gym.make("CartPole-v1")],
                            autoreset_mode=AutoresetMode.NEXT_STEP)._short


class WrongObs(gym.Env):
    """Observations of the wrong shape, or floats from an int Box: gymnasium refuses both."""

    observation_space = gym.spaces.Box(0, 9, (2,), np.int64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, obs: np.ndarray):
        self.obs = obs

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        return np.zeros(2, np.int64), {}

    def step(self, action: int) -> tuple:
        return self.obs, 0.0, False, False, {}


@pytest.mark.parametrize("obs", [np.zeros(3, np.int64), np.full(2, 1.5)], ids=["shape", "dtype"])
def test_refuses_what_gymnasium_refuses(obs: np.ndarray) -> None:
    for venv in (SyncSameStep([lambda: WrongObs(obs)]),
                 SyncVectorEnv([lambda: WrongObs(obs)], autoreset_mode=AutoresetMode.SAME_STEP)):
        venv.reset(seed=0)
        with pytest.raises((ValueError, TypeError)):
            venv.step(np.zeros(1, np.int64))
