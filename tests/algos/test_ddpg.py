"""DDPG: soft target arithmetic, TD target masking, updates, checkpoint round-trip."""

import torch
from torch import nn

from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.ddpg import DDPG
from rltrain.algos.steps import polyak_update
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=1)


def make_ddpg(**overrides) -> DDPG:
    torch.manual_seed(0)
    return DDPG(DDPGConfig(hidden_sizes=[16, 16], **overrides), SPEC)


def make_batch(n: int = 32, seed: int = 1) -> TransitionBatch:
    g = torch.Generator().manual_seed(seed)
    terminated = (torch.arange(n) % 2).float()  # alternating 0 / 1
    return TransitionBatch(torch.randn(n, 3, generator=g), torch.rand(n, 2, generator=g) * 2 - 1,
                           torch.randn(n, generator=g), torch.randn(n, 3, generator=g), terminated)


def test_polyak_update_mixes_known_tensors():
    target, source = nn.Linear(2, 2), nn.Linear(2, 2)
    nn.init.constant_(target.weight, 1.0)
    nn.init.constant_(target.bias, -1.0)
    nn.init.constant_(source.weight, 3.0)
    nn.init.constant_(source.bias, 1.0)
    polyak_update(target, source, tau=0.1)  # θ' = τ θ + (1 − τ) θ'
    torch.testing.assert_close(target.weight, torch.full((2, 2), 0.1 * 3.0 + 0.9 * 1.0))
    torch.testing.assert_close(target.bias, torch.full((2,), 0.1 * 1.0 + 0.9 * -1.0))
    polyak_update(target, source, tau=1.0)
    assert torch.equal(target.weight, source.weight) and torch.equal(target.bias, source.bias)


def test_terminated_transition_target_is_reward_and_others_bootstrap():
    algo, batch = make_ddpg(gamma=0.9), make_batch()
    y = algo.target(batch)
    done = batch.terminated == 1
    assert torch.equal(y[done], batch.rewards[done])
    with torch.no_grad():
        next_q = algo.critic_target(batch.next_obs, algo.actor_target(batch.next_obs))[0]
    torch.testing.assert_close(y[~done], batch.rewards[~done] + 0.9 * next_q[~done])
    assert not torch.allclose(y[~done], batch.rewards[~done])


def test_update_changes_networks_and_soft_updates_targets():
    algo, batch = make_ddpg(tau=0.25), make_batch()
    actor0 = [p.clone() for p in algo.actor.parameters()]
    critic0 = [p.clone() for p in algo.critic.parameters()]
    critic_t0 = [p.clone() for p in algo.critic_target.parameters()]
    metrics = algo.update(batch, global_step=0)
    assert all(not torch.equal(a, b)
               for a, b in zip(actor0, algo.actor.parameters(), strict=True))
    assert all(not torch.equal(a, b)
               for a, b in zip(critic0, algo.critic.parameters(), strict=True))
    pairs = zip(algo.critic_target.parameters(), algo.critic.parameters(), strict=True)
    for old, (new, src) in zip(critic_t0, pairs, strict=True):
        torch.testing.assert_close(new, 0.25 * src + 0.75 * old)
    assert set(metrics) == {"train/actor_loss", "train/critic1_loss", "train/q_loss",
                            "train/mean_q"}
    assert all(type(v) is float for v in metrics.values())


def test_exploration_actions_stay_within_unit_box():
    algo = make_ddpg(action_noise=10.0)
    action = algo.act(torch.randn(512, 3) * 100, global_step=0)
    assert action.shape == (512, 2) and action.abs().max() <= 1.0
    assert (action.abs() == 1.0).float().mean() > 0.5  # big noise mostly hits the bounds


def test_state_dict_round_trips_through_weights_only_load(tmp_path):
    algo, batch = make_ddpg(), make_batch()
    for _ in range(3):
        algo.update(batch, 0)
    torch.save(algo.state_dict(), tmp_path / "ddpg.pt")
    torch.manual_seed(123)
    fresh = DDPG(DDPGConfig(hidden_sizes=[16, 16]), SPEC)
    fresh.load_state_dict(torch.load(tmp_path / "ddpg.pt", weights_only=True))
    obs = torch.randn(16, 3)
    assert torch.equal(fresh.policy.act(obs), algo.policy.act(obs))
    algo.update(batch, 0)
    fresh.update(batch, 0)  # same optimizer state -> same next step
    for a, b in zip(algo.critic.parameters(), fresh.critic.parameters(), strict=True):
        assert torch.equal(a, b)
