"""SAC: soft TD target, temperature tuning, updates, checkpoint round-trip."""

import math

import pytest
import torch

from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.sac import SAC
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=1)


def make_sac(**overrides) -> SAC:
    torch.manual_seed(0)
    return SAC(SACConfig(hidden_sizes=[16, 16], **overrides), SPEC)


def make_batch(n: int = 32, seed: int = 1) -> TransitionBatch:
    g = torch.Generator().manual_seed(seed)
    terminated = (torch.arange(n) % 2).float()
    return TransitionBatch(torch.randn(n, 3, generator=g), torch.rand(n, 2, generator=g) * 2 - 1,
                           torch.randn(n, generator=g), torch.randn(n, 3, generator=g), terminated)


def test_soft_target_masks_bootstrap_on_terminated_only():
    algo, batch = make_sac(gamma=0.9, alpha=0.5), make_batch()
    torch.manual_seed(3)
    y = algo.target(batch)
    torch.manual_seed(3)  # same policy sample a' ~ π(s')
    with torch.no_grad():
        next_action, next_log_prob = algo.actor(batch.next_obs)
        next_q = algo.critic_target(batch.next_obs, next_action).min(0).values
    done = batch.terminated == 1
    assert torch.equal(y[done], batch.rewards[done])
    soft_value = next_q - 0.5 * next_log_prob
    torch.testing.assert_close(y[~done], batch.rewards[~done] + 0.9 * soft_value[~done])


@pytest.mark.parametrize("target_entropy, direction", [(10.0, 1.0), (-10.0, -1.0)])
def test_alpha_rises_when_entropy_is_below_target_and_falls_above(target_entropy, direction):
    algo = make_sac(target_entropy=target_entropy, alpha=0.2, alpha_lr=1e-2)
    metrics = algo.update(make_batch(), global_step=0)
    entropy_gap = target_entropy - metrics["train/entropy"]  # > 0: the policy is too certain
    assert math.copysign(1.0, entropy_gap) == direction
    change = algo.log_alpha.item() - math.log(0.2)
    assert change * direction > 0
    assert abs(change) == pytest.approx(1e-2, rel=1e-3)  # Adam's first step moves by ≈ lr
    assert metrics["train/alpha"] == pytest.approx(math.exp(algo.log_alpha.item()))


def test_fixed_alpha_stays_fixed():
    algo = make_sac(alpha=0.3, autotune_alpha=False)
    for step in range(3):
        metrics = algo.update(make_batch(), step)
    assert metrics["train/alpha"] == pytest.approx(0.3)


def test_default_target_entropy_is_minus_action_dim():
    assert make_sac().target_entropy == -2.0


def test_update_changes_networks_and_soft_updates_critic_target():
    algo, batch = make_sac(tau=0.5), make_batch()
    actor0 = [p.clone() for p in algo.actor.parameters()]
    critic0 = [p.clone() for p in algo.critic.parameters()]
    target0 = [p.clone() for p in algo.critic_target.parameters()]
    metrics = algo.update(batch, global_step=0)
    assert all(not torch.equal(a, b)
               for a, b in zip(actor0, algo.actor.parameters(), strict=True))
    assert all(not torch.equal(a, b)
               for a, b in zip(critic0, algo.critic.parameters(), strict=True))
    pairs = zip(algo.critic_target.parameters(), algo.critic.parameters(), strict=True)
    for old, (new, src) in zip(target0, pairs, strict=True):
        torch.testing.assert_close(new, 0.5 * src + 0.5 * old)
    assert set(metrics) == {"train/actor_loss", "train/critic1_loss", "train/critic2_loss",
                            "train/q_loss", "train/mean_q", "train/alpha", "train/entropy"}
    assert all(type(v) is float for v in metrics.values())


def test_policy_delay_skips_actor_and_keeps_its_metrics():
    algo, batch = make_sac(policy_delay=2), make_batch()
    first = algo.update(batch, 0)
    actor0, alpha0 = [p.clone() for p in algo.actor.parameters()], algo.log_alpha.item()
    second = algo.update(batch, 1)
    assert all(torch.equal(a, b) for a, b in zip(actor0, algo.actor.parameters(), strict=True))
    assert algo.log_alpha.item() == alpha0
    assert second["train/actor_loss"] == first["train/actor_loss"]


def test_exploration_actions_stay_within_unit_box():
    algo = make_sac(log_std_max=2.0)
    action = algo.act(torch.randn(512, 3) * 100, global_step=0)
    assert action.shape == (512, 2) and action.abs().max() <= 1.0


def test_state_dict_round_trips_through_weights_only_load(tmp_path):
    algo, batch = make_sac(), make_batch()
    for step in range(3):
        algo.update(batch, step)
    torch.save(algo.state_dict(), tmp_path / "sac.pt")
    torch.manual_seed(123)
    fresh = SAC(SACConfig(hidden_sizes=[16, 16]), SPEC)
    fresh.load_state_dict(torch.load(tmp_path / "sac.pt", weights_only=True))
    obs = torch.randn(16, 3)
    assert torch.equal(fresh.policy.act(obs), algo.policy.act(obs))
    assert fresh.log_alpha.item() == algo.log_alpha.item() != 0.0
    torch.manual_seed(7)
    algo.update(batch, 3)
    torch.manual_seed(7)
    fresh.update(batch, 3)  # same optimizers, log α and samples -> same next step
    for a, b in zip(algo.actor.parameters(), fresh.actor.parameters(), strict=True):
        assert torch.equal(a, b)
    assert fresh.log_alpha.item() == algo.log_alpha.item()
