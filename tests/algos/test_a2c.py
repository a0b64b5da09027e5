"""A2C: one gradient step per rollout, optimizer choice, n-step advantages, checkpoints."""

from __future__ import annotations

import pytest
import torch

from rltrain.algos.a2c import A2C
from rltrain.algos.configs.a2c import A2CConfig
from rltrain.algos.optim import FusedAdam, RMSprop
from rltrain.buffers.rollout import compute_gae
from rltrain.config.schema import TrainConfig
from rltrain.errors import UserError
from rltrain.types import EnvSpec, RolloutBatch
from tests.algos.rollouts import make_rollout as synthetic_rollout

DISCRETE = EnvSpec(obs_shape=(3,), action_kind="discrete", action_dim=2, num_envs=2)
BOX = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=2)


def make_a2c(spec: EnvSpec = DISCRETE, **overrides) -> A2C:
    torch.manual_seed(0)
    return A2C(A2CConfig(hidden_sizes=[16], **overrides), spec)


def make_rollout(algo: A2C, n_steps: int = 5) -> RolloutBatch:
    """A rollout collected from random observations and rewards with the algorithm's `act`."""
    return synthetic_rollout(algo, n_steps, gae_lambda=1.0)


@pytest.mark.parametrize("spec", [DISCRETE, BOX], ids=["discrete", "box"])
def test_one_update_per_rollout_changes_parameters(spec):
    algo = make_a2c(spec)
    before = [p.clone() for p in algo.policy.parameters()]
    metrics = algo.update(make_rollout(algo))
    changed = [not torch.equal(b, p) for b, p in zip(before, algo.policy.parameters(), strict=True)]
    assert all(changed)
    assert algo.optimizer.state[next(algo.policy.parameters())]["step"] == 1
    for name in ("train/policy_loss", "train/value_loss", "train/entropy_loss",
                 "train/explained_variance", "train/learning_rate", "train/grad_norm"):
        assert name in metrics


def test_optimizer_is_selected_by_config():
    rms = make_a2c(optimizer="rmsprop", lr=1e-3)
    adam = make_a2c(optimizer="adam", lr=1e-3)
    assert isinstance(rms.optimizer, RMSprop)
    assert rms.optimizer.defaults["alpha"] == 0.99 and rms.optimizer.defaults["eps"] == 1e-5
    assert isinstance(adam.optimizer, FusedAdam)
    assert adam.optimizer.defaults["eps"] == 1e-5


def test_invalid_optimizer_name_is_a_user_error():
    cfg = TrainConfig(algo=A2CConfig(optimizer="sgd"))
    with pytest.raises(UserError, match="algo.optimizer='sgd': choose one of rmsprop, adam"):
        cfg.algo.validate(cfg)


def test_anneal_lr_scales_learning_rate_by_progress_remaining():
    algo = make_a2c(lr=1e-3, anneal_lr=True)
    metrics = algo.update(make_rollout(algo), progress_remaining=0.25)
    assert metrics["train/learning_rate"] == pytest.approx(2.5e-4)
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(2.5e-4)


def test_n_step_advantage_equals_discounted_sum_plus_bootstrap():
    gamma = 0.9
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    last_value = 4.0
    next_values = torch.tensor([[1.0], [1.5], [last_value]])
    no = torch.zeros(3, 1, dtype=torch.bool)
    adv, ret = compute_gae(rewards, values, next_values, no, no, gamma, gae_lambda=1.0)
    # R_t = Σ_k γ^k r_{t+k} + γ^(T−t) V(s_T); A_t = R_t − V(s_t)
    expected_ret = [1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 4, 2 + 0.9 * 3 + 0.81 * 4, 3 + 0.9 * 4]
    assert torch.allclose(ret.squeeze(1), torch.tensor(expected_ret))
    assert torch.allclose(adv, ret - values)


def test_policy_gradient_step_matches_hand_computed_loss():
    algo = make_a2c(ent_coef=0.01, vf_coef=0.5)
    batch = make_rollout(algo)
    dist = algo.policy.dist(batch.obs)
    log_prob = dist.log_prob(batch.actions)
    expected_pg = -(batch.advantages * log_prob).mean().item()
    expected_vf = (batch.returns - algo.policy.value(batch.obs)).pow(2).mean().item()
    metrics = algo.update(batch)
    assert metrics["train/policy_loss"] == pytest.approx(expected_pg, rel=1e-5)
    assert metrics["train/value_loss"] == pytest.approx(expected_vf, rel=1e-5)
    assert metrics["train/entropy_loss"] == pytest.approx(-dist.entropy().mean().item(), rel=1e-5)


def test_state_dict_round_trips_through_weights_only_load(tmp_path):
    algo = make_a2c(BOX)
    algo.update(make_rollout(algo))
    torch.save(algo.state_dict(), tmp_path / "a2c.pt")
    restored = make_a2c(BOX)
    restored.load_state_dict(torch.load(tmp_path / "a2c.pt", weights_only=True))
    for a, b in zip(algo.policy.parameters(), restored.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    batch = make_rollout(algo)
    assert algo.update(batch) == restored.update(batch)


def test_explained_variance_is_omitted_when_returns_are_constant():
    algo = make_a2c()
    batch = make_rollout(algo)._replace(returns=torch.full((10,), 100.0))
    metrics = algo.update(batch)
    assert "train/explained_variance" not in metrics
    assert "train/explained_variance" in algo.update(make_rollout(algo))
