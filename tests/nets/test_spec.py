"""`algo.net` (`net.*`) reaches every algorithm's networks: widths, activation, layer norm,
orthogonal init, and the CNN encoder for image observations."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from rltrain.config.registry import ALGOS
from rltrain.errors import UserError
from rltrain.nets.config import NetConfig
from rltrain.nets.continuous import EnsembleLayerNorm, EnsembleLinear
from rltrain.nets.encoder import NatureCNN
from rltrain.nets.mlp import ACTIVATIONS
from rltrain.nets.spec import resolve_nets
from rltrain.types import EnvSpec

KIND = {name: "discrete" if "discrete" in spec.action_kinds else spec.action_kinds[0]
        for name, spec in ALGOS.items()}
"""The action kind each algorithm is built for here (Discrete where it handles it), from its traits:
an algorithm added to the registry is covered without editing this file."""


def build(name: str, obs_shape: tuple[int, ...] = (3,), pixels: bool = False, **fields):
    """Algorithm `name` on a 2-action env, with `algo.hidden_sizes=[16, 16]` (and CrossQ's
    `algo.critic_hidden_sizes`; ARS's initial weights, which it zeroes by default) and `fields`."""
    torch.manual_seed(0)
    spec = ALGOS[name]
    sizes: dict = {"hidden_sizes": [16, 16]}
    if name == "ars":
        sizes["zero_policy"] = False
    if "critic_hidden_sizes" in {f.name for f in dataclasses.fields(spec.config)}:  # CrossQ's
        sizes["critic_hidden_sizes"] = [16, 16]
    cfg = spec.config(**sizes, net=NetConfig(**fields))
    return spec.build(cfg, EnvSpec(obs_shape, KIND[name], 2, 1, pixels), "cpu")


def networks(name: str, algo) -> tuple[nn.Sequential | None, nn.Sequential | None]:
    """(policy MLP, value/Q MLP) of an algorithm; DQN has no separate policy network, ARS no
    value network."""
    if name == "ars":
        return algo.policy.body, None
    if name in ("ppo", "a2c", "trpo"):
        return algo.policy.actor_body, algo.policy.critic
    if name in ("dqn", "qrdqn", "pqn"):
        return None, algo.q_net.body
    return (algo.actor.body if name in ("sac", "tqc", "crossq") else algo.actor.net), algo.critic.net


def hidden_layers(seq: nn.Sequential) -> list[nn.Module]:
    """The linear layers of `seq` except a final output layer."""
    layers = list(seq)
    return [m for i, m in enumerate(layers)
            if isinstance(m, (nn.Linear, EnsembleLinear)) and i < len(layers) - 1]


def widths(seq: nn.Sequential) -> list[int]:
    return [m.weight.shape[0] if isinstance(m, nn.Linear) else m.weight.shape[-1]
            for m in hidden_layers(seq)]


def is_orthogonal(layer: nn.Module, gain: float) -> bool:
    """Rows (or columns, whichever are fewer) of the weight are orthogonal with norm `gain`."""
    w = layer.weight if isinstance(layer, nn.Linear) else layer.weight[0].T  # [out, in]
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    return torch.allclose(gram, gain**2 * torch.eye(gram.shape[0]), atol=1e-5)


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_unset_net_keeps_the_algorithms_hidden_sizes_and_activation(name):
    algo = build(name)
    for seq in filter(None, networks(name, algo)):
        assert widths(seq) == [16, 16]
        act_cls = ACTIVATIONS[ALGOS[name].config().activation]  # relu, or tanh for PPO/A2C
        assert sum(isinstance(m, act_cls) for m in seq) == 2
        assert not any(isinstance(m, (nn.LayerNorm, EnsembleLayerNorm)) for m in seq)


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_net_hidden_and_activation_set_every_network(name):
    algo = build(name, hidden=[24, 12], activation="gelu")
    for seq in filter(None, networks(name, algo)):
        assert widths(seq) == [24, 12]
        assert sum(isinstance(m, nn.GELU) for m in seq) == 2
        assert not any(isinstance(m, (nn.ReLU, nn.Tanh)) for m in seq)


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_actor_and_critic_widths_follow_their_own_fields(name):
    algo = build(name, hidden=[8], actor_hidden=[20], critic_hidden=[28, 14])
    actor, critic = networks(name, algo)
    if critic is not None:  # ARS refuses net.critic_hidden when its config is validated
        assert widths(critic) == [28, 14]
    if actor is not None:
        assert widths(actor) == [20]


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_layer_norm_follows_each_hidden_linear_before_its_activation(name):
    algo = build(name, layer_norm=True)
    for seq in filter(None, networks(name, algo)):
        layers = list(seq)
        for linear in hidden_layers(seq):
            i = layers.index(linear)
            assert isinstance(layers[i + 1], (nn.LayerNorm, EnsembleLayerNorm))
            assert not isinstance(layers[i + 2], (nn.Linear, EnsembleLinear))  # the activation


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_ortho_init_switch_overrides_each_algorithms_default(name):
    default_ortho = name in ("ppo", "a2c", "pqn", "trpo")  # on-policy: algo.ortho_init=true; others: torch's
    for setting, expected in ((None, default_ortho), (True, True), (False, False)):
        algo = build(name, ortho_init=setting)
        for seq in filter(None, networks(name, algo)):
            layer = hidden_layers(seq)[1]  # 16 -> 16
            assert is_orthogonal(layer, 2**0.5) is expected, (setting, seq)
            assert bool((layer.bias == 0).all()) is expected


def test_ppo_algo_ortho_init_false_stays_the_default_of_net_ortho_init():
    cfg = ALGOS["ppo"].config(ortho_init=False)
    specs = resolve_nets(cfg, EnvSpec((3,), "discrete", 2, 1), ortho=cfg.ortho_init)
    assert specs.actor.ortho is False and specs.critic.ortho is False


NO_CNN = {"ars": "a linear or MLP policy on flattened inputs, as SB3-contrib's ARS has"}
"""Algorithms that refuse the CNN encoder (images need `net.encoder=flatten`), and why."""


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_image_observations_get_a_cnn_encoder_in_every_network(name):
    if name in NO_CNN:
        with pytest.raises(UserError, match="no CNN.*net.encoder=flatten"):
            build(name, (40, 40, 3), pixels=True, cnn_channels=[4, 8, 8], cnn_features=32)
        algo = build(name, (40, 40, 3), pixels=True, encoder="flatten")
        assert algo.policy.body[0].in_features == 40 * 40 * 3
        return
    algo = build(name, (40, 40, 3), pixels=True, cnn_channels=[4, 8, 8], cnn_features=32)
    modules = {id(m): m for m in vars(algo).values() if isinstance(m, nn.Module)}
    encoders = [e for m in modules.values() for e in m.modules() if isinstance(e, NatureCNN)]
    expected = {"ppo": 2, "a2c": 2, "dqn": 2, "qrdqn": 2, "ddpg": 4, "td3": 4, "sac": 3,  # targets included
                "tqc": 3, "pqn": 1, "trpo": 2, "crossq": 2}
    assert len(encoders) == expected[name]
    assert all(e.linear.out_features == 32 and e.convs[0].out_channels == 4 for e in encoders)
    actor, critic = networks(name, algo)
    if actor is not None:
        assert in_features(actor) == 32
    assert in_features(critic) == 32 + (2 if KIND[name] == "box" else 0)  # Q(s, a) takes a too
    action = algo.policy.act(torch.randint(0, 256, (5, 40, 40, 3)).float(), deterministic=True)
    assert action.shape == ((5,) if KIND[name] == "discrete" else (5, 2))


def in_features(seq: nn.Sequential) -> int:
    first = next(m for m in seq if isinstance(m, (nn.Linear, EnsembleLinear)))
    return first.in_features if isinstance(first, nn.Linear) else first.weight.shape[1]


def test_flat_observations_have_no_encoder_module_so_checkpoint_keys_stay():
    algo = build("ppo")
    assert algo.policy.actor_encoder is None and algo.policy.critic_encoder is None
    assert sorted(algo.policy.state_dict()) == sorted(
        ["actor_body.0.weight", "actor_body.0.bias", "actor_body.2.weight", "actor_body.2.bias",
         "head.logits.weight", "head.logits.bias", "critic.0.weight", "critic.0.bias",
         "critic.2.weight", "critic.2.bias", "critic.4.weight", "critic.4.bias"])


def test_encoder_flatten_keeps_an_mlp_on_3d_observations():
    algo = build("ppo", (2, 3, 4), encoder="flatten")
    assert algo.policy.actor_encoder is None
    assert algo.policy.actor_body[0].in_features == 24


def test_encoder_cnn_on_vector_observations_is_a_user_error():
    with pytest.raises(UserError, match=r"net.encoder=cnn needs image observations .*\[3\]"):
        build("ppo", encoder="cnn")


@pytest.mark.parametrize("name", ["ppo", "a2c"])
def test_share_encoder_gives_ppo_and_a2c_one_cnn(name):
    algo = build(name, obs_shape=(4, 36, 36), pixels=True, share_encoder=True)
    assert isinstance(algo.policy.actor_encoder, NatureCNN) and algo.policy.critic_encoder is None


@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_share_encoder_on_an_off_policy_algorithm_is_a_user_error(name):
    from rltrain.config.compose import compose_train_config

    env = "CartPole-v1" if name == "dqn" else "Pendulum-v1"
    with pytest.raises(UserError, match=rf"net.share_encoder=true is for PPO and A2C; {name}"):
        compose_train_config([f"algo={name}", f"env={env}", "net.share_encoder=true"])
