"""The PPO/A2C actor-critic network: heads by action space, log-std bounds, stable names."""

from __future__ import annotations

import torch

from rltrain.nets.actor_critic import ActorCritic
from rltrain.nets.spec import ActorCriticSpecs, NetSpec
from rltrain.types import EnvSpec


def nets(obs_dim: int = 3) -> ActorCriticSpecs:
    spec = NetSpec(obs_shape=(obs_dim,), hidden=(16,), activation="tanh", ortho=True)
    return ActorCriticSpecs(spec, spec)


def test_gaussian_log_std_is_clamped_to_the_given_bounds():
    model = ActorCritic(EnvSpec((3,), "box", 2, 1), nets(), log_std_bounds=(-1.0, 0.5))
    with torch.no_grad():
        model.head.log_std.fill_(100.0)
    assert torch.equal(model.dist(torch.zeros(4, 3)).log_std, torch.full((4, 2), 0.5))
    with torch.no_grad():
        model.head.log_std.fill_(-100.0)
    assert torch.equal(model.dist(torch.zeros(4, 3)).log_std, torch.full((4, 2), -1.0))


def test_value_is_one_number_per_row_and_act_is_deterministic():
    model = ActorCritic(EnvSpec((3,), "discrete", 4, 1), nets())
    obs = torch.randn(5, 3)
    assert model.value(obs).shape == (5,)
    assert torch.equal(model.act(obs), model.act(obs))


def test_parameter_names_stay_those_checkpoints_store():
    model = ActorCritic(EnvSpec((3,), "box", 2, 1), nets(), log_std_init=-0.5)
    names = set(model.state_dict())
    assert {"head.log_std", "head.mean.weight", "critic.0.weight"} <= names
    assert all(n.split(".")[0] in {"actor_encoder", "actor_body", "head", "critic_encoder",
                                   "critic"} for n in names)
    assert torch.equal(model.head.log_std, torch.full((2,), -0.5))


def image_nets() -> ActorCriticSpecs:
    spec = NetSpec(obs_shape=(4, 36, 36), hidden=(), image=True, pixels=True,
                   cnn_channels=(4, 4, 4), cnn_features=8)
    return ActorCriticSpecs(spec, spec)


def test_a_shared_encoder_is_one_cnn_that_both_losses_train():
    env = EnvSpec((4, 36, 36), "discrete", 3, 1)
    torch.manual_seed(0)
    shared = ActorCritic(env, image_nets(), share_encoder=True)
    separate = ActorCritic(env, image_nets())
    assert shared.critic_encoder is None and separate.critic_encoder is not None
    conv_params = sum(p.numel() for p in shared.actor_encoder.parameters())
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(separate) - count(shared) == conv_params
    obs = torch.randint(0, 256, (5, 4, 36, 36), dtype=torch.uint8)
    dist, value = shared.dist_value(obs)
    assert torch.equal(dist.log_probs, shared.dist(obs).log_probs)
    assert torch.equal(value, shared.value(obs))
    value.sum().backward()  # the critic's loss alone reaches the shared convolutions
    assert shared.actor_encoder.convs[0].weight.grad.abs().sum() > 0


def test_unshared_dist_value_matches_dist_and_value():
    model = ActorCritic(EnvSpec((3,), "box", 2, 1), nets())
    obs = torch.randn(4, 3)
    dist, value = model.dist_value(obs)
    assert torch.equal(dist.mean, model.dist(obs).mean) and torch.equal(value, model.value(obs))
