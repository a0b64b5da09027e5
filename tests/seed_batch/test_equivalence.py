"""Seed k trained inside a batch follows the run `seed=k` alone, update by update.

Not bit for bit (`rltrain/seed_batch/stacked.py`): the batch sums the same terms in other orders, so
its first update already differs in the last bits (measured 2026-11-27 on seeds 5-7 under the
four kernel settings of `make test-float`, 12 runs each: metrics bit-identical for 0 updates in
PPO and DQN, 0-2 in A2C, 0-1 gradient steps in SAC, 0-8 in DDPG, 0-33 in TD3). The differences
stay at rounding level (~1e-7 of a metric's scale) until a threshold is crossed (a ratio at
PPO's clip, an action at its bound), then grow ~10x per 10-20 steps, from a step that depends on
the CPU. Within 1e-5, the fewest updates seen: PPO CartPole 9 (of 15), PPO Pendulum 0 (of 2 at
the annealed rate: samples crossing the clip in the first update, 1.2e-4 apart), DQN CartPole 4
updates of 128 gradient steps, A2C CartPole 60 (of 60), SAC Pendulum 83 gradient steps, TD3 164,
DDPG 105; within 1e-3: SAC 168, TD3 184, DDPG 149 (of 300). So each case stops well before the
first of these, and compares at `rel` 1e-3 (tests/seed_batch/helpers.py says why these bounds): over
those horizons the largest gap measured was 3e-7 of a metric's scale and 2.2e-5 of how far a
tensor moved (single weights up to 1.2e-5 apart: no elementwise 1e-6 bound holds), while a
seed's stream shifted by one draw, or a learning rate 1% off, fails within its first 3 updates
(tried on every case). What comes after is covered by benchmarks/seed_batch.py, which compares
the final return distributions of 20 seeds batched and 20 single runs.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from rltrain.config.compose import compose_train_config
from tests.seed_batch.helpers import assert_batch_matches_single_runs

pytestmark = pytest.mark.orders

# The first rollout of the Pendulum preset (32 envs x 128 steps) is its whole budget here, so an
# annealed rate would be 0 for its one update: it trains at the preset's rate instead.
FULL_RATE = "algo.anneal_lr=false"

STACKED = [
    ("ppo", "CartPole-v1", 5 * 32 * 8, 5, ()),
    ("ppo", "Pendulum-v1", 128 * 32, 1, (FULL_RATE,)),
    ("dqn", "CartPole-v1", 1700, 3, ()),
    ("qrdqn", "CartPole-v1", 1700, 3, ()),
    ("a2c", "CartPole-v1", 20 * 8 * 5, 20, ()),
    ("pqn", "CartPole-v1", 3 * 128 * 4, 3, ()),
    ("sac", "Pendulum-v1", 1000 + 59, 60, ()),
    ("td3", "Pendulum-v1", 1000 + 59, 60, ()),
    ("ddpg", "Pendulum-v1", 1000 + 59, 60, ()),
    ("tqc", "Pendulum-v1", 100 + 59, 60, ("algo.hidden_sizes=[64,64]",)),
]
"""(algo, env, budget, updates, overrides): each algorithm's stacked cases, their horizons."""


@pytest.mark.parametrize("algo,env_id,budget,updates,extra", STACKED)
def test_seed_in_a_batch_matches_its_single_run(tmp_path, algo, env_id, budget, updates, extra):
    """Tuned presets, every logged metric, update by update. PPO CartPole: 8 envs x 32 steps,
    20 epochs of one minibatch; Pendulum: 32 envs x 128 steps, reward normalization, 20 epochs
    of two at lr 3e-3; DQN CartPole: 1000 random steps, then 128 gradient steps every 256 env steps (ε-greedy
    and replay sampling from each seed's stream): 3 updates are 384 gradient steps. A2C CartPole:
    8 envs x 5 steps, one RMSprop step per rollout: 20 updates. SAC Pendulum: 1000 random steps,
    then one gradient step per env step (replay indices and both reparameterization noises from
    each seed's stream): 60 updates. TD3 and DDPG Pendulum: 1000 random steps, then 60 gradient
    steps (exploration noise, TD3's smoothing noise and replay indices from each seed's stream).
    TQC Pendulum: 100 random steps, then 60 gradient steps of SAC's draws (64x64 networks)."""
    cfg = compose_train_config([
        f"algo={algo}", f"env={env_id}", "num_seeds=3", "seed=5", f"total_timesteps={budget}",
        "eval.freq=0", "eval.episodes=1", "logger=none", "progress=off", *extra])
    assert_batch_matches_single_runs(cfg, tmp_path, updates)


@pytest.mark.parametrize("algo,env_id,budget,updates,extra", [
    ("ppo_lstm", "CartPoleNoVel-v1", 3 * 32 * 8, 3, ()),
    ("ppo", "Pendulum-v1", 128 * 32, 1, ("algo.use_sde=true", FULL_RATE)),
])
def test_unstackable_on_policy_seeds_run_as_their_single_runs(tmp_path, caplog, algo, env_id,
                                                              budget, updates, extra):
    """A recurrent core or gSDE cannot run stacked: each seed's own PPO acts and updates in
    turn, with its own random state and its own kernels, so every metric and parameter equals
    its single run's bit for bit (episode starts, the recurrent state and the gSDE noise are
    each member's own): the same order by construction, on any CPU; the console says
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
    each single run's rates (logged as train/learning_rate, compared exactly, with every
    metric). The decaying rates keep both orders within 3e-7 over these horizons (measured)."""
    cfg = compose_train_config([
        f"algo={algo}", "env=Pendulum-v1", "num_seeds=2", "seed=5", f"total_timesteps={budget}",
        "algo.lr_decay_steps=${total_timesteps}", "algo.actor_lr=2e-3", "eval.freq=0",
        "eval.episodes=1", "logger=none", "progress=off"])
    assert_batch_matches_single_runs(cfg, tmp_path, updates)


@pytest.mark.parametrize("algo,env_id,budget,updates,extra", STACKED)
def test_a_stacked_batch_of_one_is_its_single_run_bit_for_bit(tmp_path, algo, env_id, budget,
                                                               updates, extra):
    """`<Algo>.stack([member])`: with S = 1 the seed layers call a single run's kernels
    (`F.linear`, `F.layer_norm`, the foreach norm) and its Adam the fused kernel (a 1-output
    head's gradient included), so a batch of one computes its single run's every metric and
    weight exactly: the step towards a single run that is a batch of one."""
    cfg = compose_train_config([
        f"algo={algo}", f"env={env_id}", "num_seeds=2", "seed=5", f"total_timesteps={budget}",
        "eval.freq=0", "eval.episodes=1", "logger=none", "progress=off", *extra])
    assert_batch_matches_single_runs(dataclasses.replace(cfg, num_seeds=1), tmp_path, updates,
                                     rel=0.0)
