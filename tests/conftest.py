"""Shared test setup: one torch thread, headless rendering, configs registered once, tiny envs."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.config.schema import CheckpointConfig, EnvConfig, EvalConfig, LoggerConfig, TrainConfig
from rltrain.config.store import register_configs
from rltrain.config.validation import validate

# Small MLPs run fastest on one thread, and the test machine has two cores shared with others.
torch.set_num_threads(1)

COUNTER_ID = "rltrain_test/Counter-v0"
"""Test-only gymnasium id of `CounterEnv` (registered once per session)."""


class CounterEnv(gym.Env):
    """An episode is a step counter: the observation after step k is `[k]` and its reward is k.

    Action 1 terminates the episode; action 0 continues it. Truncation comes from gymnasium's
    TimeLimit (`max_episode_steps`), so both kinds of episode end happen at steps the test picks.
    """

    observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.k = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.k = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.k += 1
        obs = np.array([float(self.k)], dtype=np.float32)
        return obs, float(self.k), bool(int(action) == 1), False, {}


@pytest.fixture(scope="session", autouse=True)
def _session_setup() -> None:
    """Headless pygame, the ConfigStore filled once, and the test-only env registered."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if COUNTER_ID not in gym.registry:
        gym.register(id=COUNTER_ID, entry_point=CounterEnv)
    register_configs()


@pytest.fixture
def counter_env_id() -> str:
    """The gymnasium id of `CounterEnv`."""
    return COUNTER_ID


@pytest.fixture
def tiny_cfg() -> Callable[..., TrainConfig]:
    """Factory of a validated, seconds-long PPO-on-CartPole `TrainConfig` (no loggers, no evals).

    Keyword arguments replace top-level fields; `algo=`/`env=`/... dicts update those sections.
    """

    def make(**changes: Any) -> TrainConfig:
        sections = {
            "algo": PPOConfig(n_steps=16, batch_size=16, n_epochs=2, hidden_sizes=[16, 16]),
            "env": EnvConfig(id="CartPole-v1", num_envs=2, max_episode_steps=50),
            "logger": LoggerConfig(tensorboard=False, csv=False),
            "eval": EvalConfig(freq=0, episodes=2, num_envs=2),
            "checkpoint": CheckpointConfig(freq=0),
        }
        for name, section in sections.items():
            for key, value in dict(changes.pop(name, {})).items():
                setattr(section, key, value)
        fields = {"total_timesteps": 64, "progress": "off", "seed": 0, **changes}
        return validate(TrainConfig(**sections, **fields))

    return make


def preset_values(name: str) -> dict[str, Any]:
    """The values a tuned preset (`conf/tuned/<name>.yaml`) sets, flattened to dotted keys, read
    from the shipped file: tests check that a preset applies without copying its numbers."""
    from importlib import resources

    import yaml

    text = resources.files("rltrain.conf").joinpath("tuned", f"{name}.yaml").read_text()
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}{key}.", value)
        else:
            flat[prefix[:-1]] = node

    walk("", {k: v for k, v in yaml.safe_load(text).items() if k != "defaults"})
    return flat


def config_value(cfg: Any, dotted: str) -> Any:
    """`cfg.a.b` for `"a.b"` (a dataclass config or a plain dict)."""
    for part in dotted.split("."):
        cfg = cfg[part] if isinstance(cfg, dict) else getattr(cfg, part)
    return cfg
