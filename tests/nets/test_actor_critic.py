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
