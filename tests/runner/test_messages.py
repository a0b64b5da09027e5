"""The run's console lines read right: singular and plural, thousands separators."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from rltrain.runner.messages import say_start


@pytest.mark.parametrize(("num_envs", "text"), [(1, "(1 env, device cpu)"),
                                                (8, "(8 envs, device cpu)")])
def test_start_line_counts_envs_in_words(tiny_cfg, caplog, num_envs, text):
    with caplog.at_level(logging.INFO, logger="rltrain"):
        say_start(tiny_cfg(), 100_000, num_envs, torch.device("cpu"), Path("run"))
    assert text in caplog.text and "for 100,000 env steps" in caplog.text


def _warnings(caplog, cfg, resumed=False) -> list[str]:
    from rltrain.runner.messages import say_setup

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rltrain"):
        say_setup(cfg, 1, resumed=resumed)
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_off_policy_budget_before_learning_starts_is_warned(caplog):
    from rltrain.config.compose import compose_train_config

    cfg = compose_train_config(["algo=sac", "env=pendulum", "total_timesteps=300"])  # preset: 1000
    (line,) = _warnings(caplog, cfg)
    assert line.startswith("total_timesteps=300 ends before algo.learning_starts=1,000")
    assert _warnings(caplog, compose_train_config(
        ["algo=sac", "env=pendulum", "total_timesteps=300", "algo.learning_starts=299"])) == []
    assert _warnings(caplog, compose_train_config(["algo=ppo", "env.id=Pendulum-v1",
                                                   "total_timesteps=300"])) == []


def test_a_decay_to_zero_before_the_end_is_warned_with_the_steps_lost(caplog):
    from rltrain.config.compose import compose_train_config

    base = ["algo=dqn", "env=cartpole", "total_timesteps=3000"]
    (line,) = _warnings(caplog, compose_train_config([*base, "algo.lr_decay_steps=1000"]))
    assert ("reaches algo.lr_final=0 at step 1,000 of 3,000 (algo.lr_decay_steps): the last "
            "2,000 steps learn nothing") in line
    assert _warnings(caplog, compose_train_config(base)) == []  # the preset: over the budget
    assert _warnings(caplog, compose_train_config(
        [*base, "algo.lr_decay_steps=1000", "algo.lr_final=1e-4"])) == []  # goes on learning
    assert _warnings(caplog, compose_train_config([*base, "algo.lr_decay_steps=1000"]),
                     resumed=True) == []  # a resume refuses a budget past such a decay


@pytest.mark.parametrize(("preset_env", "budget"), [("lunarlander", 100_000),
                                                    ("mountaincar", 120_000)])
def test_the_dqn_presets_decay_over_the_budget_given(preset_env, budget):
    from rltrain.config.compose import compose_train_config

    cfg = compose_train_config(["algo=dqn", f"env={preset_env}"])
    assert cfg.total_timesteps == budget and cfg.algo.lr_decay_steps == budget
    longer = compose_train_config(["algo=dqn", f"env={preset_env}", "total_timesteps=3e5"])
    assert longer.algo.lr_decay_steps == 3e5 and longer.algo.lr_final == 0


def test_the_dqn_cartpole_preset_keeps_rl_zoos_constant_rate():
    """Its decay hid the late target copy (fixed 2026-11-28): RL-Zoo's values alone since."""
    from rltrain.config.compose import compose_train_config

    cfg = compose_train_config(["algo=dqn", "env=cartpole"])
    assert cfg.total_timesteps == 50_000 and cfg.algo.lr == 2.3e-3
    assert cfg.algo.lr_decay_steps in (None, 0)


def test_atari_settings_on_another_env_are_warned(caplog):
    from rltrain.config.compose import compose_train_config

    (line,) = _warnings(caplog, compose_train_config(
        ["algo=ppo", "env=pendulum", "env.atari.frame_skip=2", "env.atari.clip_reward=false"]))
    assert line == ("env.atari.frame_skip=2, env.atari.clip_reward=False: Pendulum-v1 is not an "
                    "Atari (ALE/<Game>-v5) id, so the Atari preprocessing and its settings do "
                    "not apply")
    assert _warnings(caplog, compose_train_config(["algo=ppo", "env=pendulum"])) == []
