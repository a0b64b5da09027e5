"""The literal algorithm table: lookups, helpful errors, action-space checks."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from rltrain.algos.configs.base import AlgoConfig, OffPolicyConfig, OnPolicyConfig
from rltrain.config import registry
from rltrain.config.catalog import ALGORITHMS, SPACE_NAMES, AlgoEntry
from rltrain.config.registry import ALGOS, check_action_space, get_algo_spec
from rltrain.errors import UserError


def test_known_algo_returns_its_spec():
    spec = get_algo_spec("ppo")
    assert spec is ALGOS["ppo"]
    assert spec.family == "on_policy"
    assert set(spec.action_kinds) == {"discrete", "box", "multi_discrete", "multi_binary"}


def test_unknown_algo_name_is_a_user_error_with_the_options():
    with pytest.raises(UserError, match=r"unknown algo 'ppo2': did you mean .*ppo"):
        get_algo_spec("ppo2")
    with pytest.raises(UserError, match=r"unknown algo 'xyz': choose one of .*ppo"):
        get_algo_spec("xyz")


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_registered_algo_is_consistently_named_and_shipped(name):
    spec = ALGOS[name]
    assert issubclass(spec.config, AlgoConfig)
    assert spec.config().name == name  # one name everywhere: registry key = config default
    assert spec.family in ("on_policy", "off_policy")
    assert spec.action_kinds and set(spec.action_kinds) <= set(SPACE_NAMES)
    assert resources.files("rltrain.conf").joinpath("algo", f"{name}.yaml").is_file()
    assert callable(spec.build)


@pytest.fixture
def box_only(monkeypatch):
    """A registry entry that handles Box actions only (independent of the shipped algorithms)."""
    monkeypatch.setitem(registry.ALGOS, "boxonly", AlgoEntry(
        "rltrain.algos.configs.base:OffPolicyConfig", "rltrain.algos.ddpg", ("box",)))
    return "boxonly"


def test_there_is_one_algorithm_table():
    # registry.ALGOS was a view rebuilding AlgoSpecs from catalog.ALGORITHMS: two tables
    assert ALGOS is ALGORITHMS
    assert get_algo_spec("sac") is ALGORITHMS["sac"]


@pytest.mark.parametrize("config_path, family", [
    ("rltrain.algos.configs.ppo:PPOConfig", "on_policy"),
    ("rltrain.algos.configs.a2c:A2CConfig", "on_policy"),
    ("rltrain.algos.configs.sac:SACConfig", "off_policy"),  # gSDE (SDEConfig) is no family
    ("rltrain.algos.configs.base:OffPolicyConfig", "off_policy"),
])
def test_an_entrys_family_is_its_config_class_base(config_path, family):
    entry = AlgoEntry(config_path, "rltrain.algos.ppo", ("box",))
    assert entry.family == family
    assert issubclass(entry.config, OnPolicyConfig if family == "on_policy" else OffPolicyConfig)


def test_a_config_class_of_no_family_is_refused_by_name():
    with pytest.raises(ValueError, match="rltrain.algos.configs.base:AlgoConfig derives from "
                                         "neither OnPolicyConfig nor OffPolicyConfig"):
        _ = AlgoEntry("rltrain.algos.configs.base:AlgoConfig", "rltrain.algos.ppo", ("box",)).family


def test_action_space_mismatch_names_the_space_and_the_fitting_algorithms(box_only):
    fitting = sorted(k for k, s in ALGOS.items() if "discrete" in s.action_kinds)
    with pytest.raises(UserError) as err:
        check_action_space(box_only, "discrete", "CartPole-v1")
    message = str(err.value)
    assert message.startswith("algo=boxonly cannot handle CartPole-v1's Discrete action space")
    assert message.endswith("algorithms that fit: " + ", ".join(fitting))
    assert "ppo" in fitting


@pytest.mark.parametrize("algo, kind, env_id, hint", [
    ("dqn", "box", "CarRacing-v3",
     "or +env.kwargs.continuous=false gives CarRacing-v3 Discrete actions"),
    ("sac", "discrete", "LunarLander-v3", "or env=LunarLanderContinuous-v3 is its Box version"),
    ("dqn", "box", "LunarLanderContinuous-v3", "or env=LunarLander-v3 is its Discrete version")])
def test_an_env_with_a_continuous_switch_says_how_to_flip_it(algo, kind, env_id, hint):
    """`env=CarRacing-v3 algo=dqn` named the fitting algorithms, not the env's own switch; where
    the other version has an id of its own (and its presets), that id."""
    pytest.importorskip("Box2D")
    with pytest.raises(UserError, match=re.escape(hint) + "$"):
        check_action_space(algo, kind, env_id)


def test_an_atari_id_gets_no_continuous_hint():
    """ALE ids take `continuous=True`, which the Atari preprocessing cannot step: the hint led
    to an AssertionError inside the env's reset."""
    with pytest.raises(UserError) as err:
        check_action_space("sac", "discrete", "ALE/Breakout-v5")
    assert str(err.value).endswith("algorithms that fit: a2c, ars, dqn, ppo, pqn, qrdqn, trpo")


def test_matching_action_space_passes(box_only):
    check_action_space(box_only, "box", "Pendulum-v1")
    check_action_space("ppo", "discrete", "CartPole-v1")


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_every_shipped_algo_refuses_the_spaces_it_cannot_handle(name):
    for kind in set(SPACE_NAMES) - set(ALGOS[name].action_kinds):
        space = SPACE_NAMES[kind]
        with pytest.raises(UserError, match=f"{space} action space; algorithms that fit: "):
            check_action_space(name, kind, "SomeEnv-v0")
