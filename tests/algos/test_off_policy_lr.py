"""The off-policy learning-rate decay (`lr_decay_steps`, `lr_final`) of SAC, TD3 and DDPG: every
optimizer's rate falls by the factor `lr` does, set before the update's steps, resumable because
it is a function of the env step alone."""

from __future__ import annotations

import pytest
import torch

from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.ddpg import DDPG
from rltrain.algos.sac import SAC
from rltrain.algos.td3 import TD3
from rltrain.config.compose import compose_train_config
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=1)
KINDS = {"sac": (SAC, SACConfig), "td3": (TD3, TD3Config), "ddpg": (DDPG, DDPGConfig)}


def make(name: str, **overrides):
    torch.manual_seed(0)
    algo_cls, cfg_cls = KINDS[name]
    return algo_cls(cfg_cls(hidden_sizes=[8, 8], **overrides), SPEC)


def batch(n: int = 16) -> TransitionBatch:
    g = torch.Generator().manual_seed(1)
    return TransitionBatch(torch.randn(n, 3, generator=g), torch.rand(n, 2, generator=g) * 2 - 1,
                           torch.randn(n, generator=g), torch.randn(n, 3, generator=g),
                           torch.zeros(n))


def rates(algo) -> dict[str, float]:
    return {name: getattr(algo, name).param_groups[0]["lr"] for name in algo.start_lrs}


@pytest.mark.parametrize("name", list(KINDS))
def test_every_rate_decays_by_the_factor_lr_does(name):
    """lr 1e-3 → 1e-4 over 100 steps; the actor's own 2e-3 falls by the same factor."""
    algo = make(name, lr=1e-3, actor_lr=2e-3, lr_final=1e-4, lr_decay_steps=100)
    metrics = algo.update(batch(), global_step=50)  # halfway: lr 5.5e-4, a factor of 0.55
    assert metrics["train/learning_rate"] == pytest.approx(5.5e-4)
    want = {"actor_optimizer": 1.1e-3, "critic_optimizer": 5.5e-4, "alpha_optimizer": 5.5e-4}
    assert rates(algo) == pytest.approx({k: want[k] for k in algo.start_lrs})
    algo.update(batch(), global_step=1000)  # after the decay: lr_final, and held
    assert rates(algo)["critic_optimizer"] == pytest.approx(1e-4)
    assert rates(algo)["actor_optimizer"] == pytest.approx(2e-4)


@pytest.mark.parametrize("name", list(KINDS))
def test_the_rate_is_set_before_the_first_step_of_the_update(name):
    """At lr_final 0 past the decay, an update must leave the actor and critics as they were:
    a rate set after the steps would move them once at the old rate."""
    algo = make(name, lr_decay_steps=10)
    before = [p.detach().clone() for p in [*algo.actor.parameters(), *algo.critic.parameters()]]
    algo.update(batch(), global_step=10)
    after = [*algo.actor.parameters(), *algo.critic.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize("name", list(KINDS))
def test_a_constant_rate_is_left_alone_and_not_logged(name):
    algo = make(name, lr=1e-3)
    metrics = algo.update(batch(), global_step=10**6)
    assert "train/learning_rate" not in metrics
    assert set(rates(algo).values()) == {1e-3}


def test_a_restored_run_steps_at_the_rate_of_its_env_step_not_its_saved_one():
    """Checkpoints hold the optimizer's last rate; the schedule, not that, sets the next one."""
    algo = make("sac", lr_decay_steps=100)
    algo.update(batch(), global_step=90)
    fresh = make("sac", lr_decay_steps=100)
    fresh.load_state_dict(algo.state_dict())
    assert rates(fresh)["critic_optimizer"] == pytest.approx(3e-5)  # the saved rate
    fresh.update(batch(), global_step=20)
    assert rates(fresh)["critic_optimizer"] == pytest.approx(2.4e-4)


def test_decay_over_the_whole_run_follows_the_budget():
    """`lr_decay_steps=${total_timesteps}` (RL-Zoo's lin_<lr>) tracks a changed budget."""
    cfg = compose_train_config(["algo=sac", "env=Pendulum-v1", "total_timesteps=3000",
                                "algo.lr_decay_steps=${total_timesteps}"])
    assert cfg.algo.lr_decay_steps == 3000
