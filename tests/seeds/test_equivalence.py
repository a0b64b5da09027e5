"""Seed k trained inside a batch matches the run `seed=k` alone, metric by metric.

Not bit for bit (see `rltrain/seeds/stacked.py`): batched float sums differ from the single
run's in the last bit, and training amplifies that, about tenfold per PPO update on CartPole
(40 clipped Adam steps per update on the Pendulum preset: ~100x). So the comparison covers the
updates that stay within a relative 1e-5 (PPO CartPole: 5, Pendulum: 1, measured: 3e-6 after
the first; DQN CartPole: 3 updates of 128 gradient steps, measured: 3e-7 after 4; A2C CartPole:
20, measured: 3e-7 but for an explained variance near 0; SAC Pendulum: 60 gradient steps,
measured on seeds 0-2: 1e-6 after 300, on seed 6: 1.2e-5 after 180 on one machine, after 80
on another (2026-11-27: 150 steps failed there); TD3 and DDPG Pendulum: 100,
measured: 5e-7 after 100, 4e-6 after 200); what comes after is
covered by benchmarks/seed_batch.py, which compares the final return
distributions of 20 seeds batched and 20 single runs.
"""

from __future__ import annotations

import logging

import pytest

from rltrain.config.compose import compose_train_config
from tests.seeds.helpers import assert_batch_matches_single_runs


@pytest.mark.parametrize("algo,env_id,budget,updates", [
    ("ppo", "CartPole-v1", 5 * 32 * 8, 5),
    ("ppo", "Pendulum-v1", 64 * 32, 1),
    ("dqn", "CartPole-v1", 1700, 3),
    ("a2c", "CartPole-v1", 20 * 8 * 5, 20),
    ("sac", "Pendulum-v1", 1000 + 59, 60),
    ("td3", "Pendulum-v1", 1000 + 99, 100),
    ("ddpg", "Pendulum-v1", 1000 + 99, 100),
])
def test_seed_in_a_batch_matches_its_single_run(tmp_path, algo, env_id, budget, updates):
    """Tuned presets, every logged metric, update by update. PPO CartPole: 8 envs x 32 steps,
    20 epochs of one minibatch; Pendulum: 32 envs x 64 steps, reward normalization, 20 epochs
    of two; DQN CartPole: 1000 random steps, then 128 gradient steps every 256 env steps (ε-greedy
    and replay sampling from each seed's stream): 3 updates are 384 gradient steps. A2C CartPole:
    8 envs x 5 steps, one RMSprop step per rollout: 20 updates. SAC Pendulum: 1000 random steps,
    then one gradient step per env step (replay indices and both reparameterization noises from
    each seed's stream): 60 updates. TD3 and DDPG Pendulum: 1000 random steps, then 100 gradient
    steps (exploration noise, TD3's smoothing noise and replay indices from each seed's stream)."""
    cfg = compose_train_config([
        f"algo={algo}", f"env={env_id}", "num_seeds=3", "seed=5", f"total_timesteps={budget}",
        "eval.freq=0", "eval.episodes=1", "logger=none", "progress=off"])
    assert_batch_matches_single_runs(cfg, tmp_path, updates)


@pytest.mark.parametrize("algo,env_id,budget,updates,extra", [
    ("ppo_lstm", "CartPoleNoVel-v1", 3 * 32 * 8, 3, ()),
    ("ppo", "Pendulum-v1", 64 * 32, 1, ("algo.use_sde=true",)),
])
def test_unstackable_on_policy_seeds_run_as_their_single_runs(tmp_path, caplog, algo, env_id,
                                                              budget, updates, extra):
    """A recurrent core or gSDE cannot run stacked: each seed's own PPO acts and updates in
    turn, with its own random state, so every metric equals its single run's exactly (episode
    starts, the recurrent state and the gSDE noise are each member's own); the console says
    that this batch has no batched speed-up."""
    cfg = compose_train_config([
        f"algo={algo}", f"env={env_id}", "num_seeds=2", "seed=5", f"total_timesteps={budget}",
        "eval.freq=0", "eval.episodes=1", "logger=none", "progress=off", *extra])
    with caplog.at_level(logging.INFO, logger="rltrain"):
        assert_batch_matches_single_runs(cfg, tmp_path, updates, rel=0.0)
    assert "cannot run stacked" in caplog.text and "without the batched speed-up" in caplog.text


@pytest.mark.parametrize("algo,budget,updates", [
    ("sac", 1000 + 149, 150),
    ("ddpg", 1000 + 99, 100),
])
def test_seed_batch_decays_its_learning_rates_as_each_single_run(tmp_path, algo, budget, updates):
    """`lr_decay_steps` over the run, with a separate actor rate: the batch's optimizers step at
    each single run's rates (logged as train/learning_rate, compared with every metric)."""
    cfg = compose_train_config([
        f"algo={algo}", "env=Pendulum-v1", "num_seeds=2", "seed=5", f"total_timesteps={budget}",
        "algo.lr_decay_steps=${total_timesteps}", "algo.actor_lr=2e-3", "eval.freq=0",
        "eval.episodes=1", "logger=none", "progress=off"])
    assert_batch_matches_single_runs(cfg, tmp_path, updates)
