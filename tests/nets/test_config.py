"""`net.*`: the command-line shorthand, validation as one-line errors, old checkpoints, resume."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from rltrain.config.overrides import compose_checked, net_overrides
from rltrain.config.schema import config_to_dict
from rltrain.config.validation import to_train_config
from rltrain.errors import UserError
from rltrain.nets.config import ACTIVATION_NAMES, RECURRENT_CORES, NetConfig
from rltrain.nets.mlp import ACTIVATIONS
from rltrain.nets.recurrent import CORES
from rltrain.run_folder.resume_rules import resume_config
from tests.conftest import preset_values

SAVED_ARGS = ["algo=sac", "env=Pendulum-v1"]


def composed(*overrides: str) -> dict:
    """The composed config dict of `rltrain <overrides>` (shorthand applied, as the CLI does)."""
    cfg = compose_checked("config", net_overrides([*SAVED_ARGS, *overrides]))
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def test_net_shorthand_names_the_algorithms_net_fields():
    assert net_overrides(["net.hidden=[256,256]", "+net.layer_norm=true", "~net.activation",
                          "net={hidden:[8]}", "network=1", "algo.net.hidden=[2]", "env.id=net.x"]
                         ) == ["algo.net.hidden=[256,256]", "+algo.net.layer_norm=true",
                               "~algo.net.activation", "algo.net={hidden:[8]}", "network=1",
                               "algo.net.hidden=[2]", "env.id=net.x"]


def test_net_overrides_reach_the_algorithm_config_and_win_over_the_preset():
    cfg = to_train_config(composed("net.hidden=[256,256]", "net.activation=tanh",
                                   "net.critic_hidden=[400,300]", "net.layer_norm=true"))
    assert cfg.preset == "sac_pendulum"
    assert cfg.algo.hidden_sizes == preset_values("sac_pendulum")["algo.hidden_sizes"]
    assert cfg.algo.net == NetConfig(hidden=[256, 256], activation="tanh",
                                     critic_hidden=[400, 300], layer_norm=True)


@pytest.mark.parametrize(("override", "message"), [
    ("net.activation=sigmoid", "net.activation='sigmoid': choose one of tanh, relu, elu, gelu, silu"),
    ("algo.activation=sigmoid", "algo.activation='sigmoid': choose one of tanh, relu"),
    ("net.hidden=[]", "net.hidden=[]: give one or more layer widths > 0, e.g. [64, 64]"),
    ("net.actor_hidden=[64,0]", "net.actor_hidden=[64, 0]: give one or more layer widths > 0"),
    ("net.critic_hidden=[-1]", "net.critic_hidden=[-1]: give one or more layer widths > 0"),
    ("algo.hidden_sizes=[0]", "algo.hidden_sizes=[0]: layer widths must be > 0"),
    ("net.encoder=resnet", "net.encoder='resnet': choose one of auto, cnn, flatten"),
    ("net.cnn_channels=[32,64]", "net.cnn_channels=[32, 64]: give three channel counts > 0"),
    ("net.cnn_features=0", "net.cnn_features=0 must be > 0"),
    ("net.hiden=[1]", "unknown field 'algo.net.hiden': did you mean algo.net.hidden"),
    ("net.layer_norm=maybe", "algo.net.layer_norm=maybe: expected bool, got str"),
])
def test_bad_net_values_are_one_line_errors_naming_the_field(override, message):
    with pytest.raises(UserError) as err:
        to_train_config(compose_checked("config", net_overrides([*SAVED_ARGS, override])))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_dqn_refuses_actor_hidden_it_has_no_policy_network_for():
    with pytest.raises(UserError, match=r"^net.actor_hidden: dqn has no separate policy network"):
        to_train_config(compose_checked("config", net_overrides(
            ["algo=dqn", "env=CartPole-v1", "net.actor_hidden=[32]"])))


def test_a_checkpoint_config_without_net_loads_with_the_defaults():
    saved = config_to_dict(to_train_config(composed()))
    del saved["algo"]["net"]  # as written before `net` existed
    assert to_train_config(saved).algo.net == NetConfig()


@pytest.mark.parametrize("override", ["net.hidden=[32]", "net.layer_norm=true", "net.ortho_init=false"])
def test_resume_refuses_a_changed_net(override):
    saved = config_to_dict(to_train_config(composed()))
    args = net_overrides([override])
    with pytest.raises(UserError, match=rf"^resume: `{re.escape(args[0])}` would change the experiment"):
        resume_config(saved, composed(override), ["resume=/some/run", *args])


def test_resume_accepts_the_saved_net_restated():
    saved = config_to_dict(to_train_config(composed("net.hidden=[32]")))
    args = net_overrides(["net.hidden=[32]", "total_timesteps=1000"])
    cfg = resume_config(saved, composed("net.hidden=[32]", "total_timesteps=1000"),
                        ["resume=/some/run", *args])
    assert cfg.algo.net.hidden == [32] and cfg.total_timesteps == 1000


def test_the_names_checked_without_torch_are_the_modules_built():
    # the config checks read these tuples (no torch); the networks map the same names to modules
    assert ACTIVATION_NAMES == tuple(ACTIVATIONS)
    assert RECURRENT_CORES == tuple(CORES)
