"""Nested Dict observations and keys with dots (issue 44): entries "body.cue", "body.pos" and
"task.cue" train, evaluate from the checkpoint, resume exactly and export; each categorical
entry keeps its one-hot encoder under a name `nn.ModuleDict` accepts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rltrain.config.compose import compose_train_config
from rltrain.envs.obs_space import leaves
from rltrain.envs.trust import NamedCode
from rltrain.errors import UserError
from rltrain.nets.encoder import DictEncoder, OneHot, module_name
from rltrain.runner.runner import Runner
from tests.envs.small_runs import assert_evaluates_and_resumes_exactly, small_run

ENV = "tests.envs.nested_envs:make_nested"
TRUSTED = NamedCode(frozenset({"tests.envs.nested_envs"}))  # as env.import= on the command line


@pytest.mark.parametrize("algo", ["ppo", "sac", "dqn"])
def test_nested_dict_obs_with_dotted_keys_train_evaluate_and_resume(algo, tmp_path):
    cfg = compose_train_config(small_run(algo, ENV, 128))
    runner = Runner(cfg, tmp_path / "a")
    assert [e.key for e in runner.env.spec.obs_entries] == ["body.cue", "body.pos", "task.cue"]
    encoder = next(m for m in runner.algo.policy.modules() if isinstance(m, DictEncoder))
    assert sorted(encoder.encoders) == ["body/cue", "task/cue"]
    assert all(isinstance(m, OneHot) for m in encoder.encoders.values())
    result = runner.run()
    assert result["episodes"] == 2 and np.isfinite(result["mean_reward"])
    assert_evaluates_and_resumes_exactly(tmp_path / "a", tmp_path, TRUSTED)


def test_encoder_names_are_the_keys_where_module_dict_accepts_them():
    assert module_name("camera") == "camera"
    assert module_name("body.cue") == "body/cue"
    assert module_name("type") == "/type" and module_name("keys") == "/keys"


def test_keys_that_flatten_to_the_same_name_are_refused_naming_them():
    space = gym.spaces.Dict({"a.b": gym.spaces.Discrete(2),
                             "a": gym.spaces.Dict({"b": gym.spaces.Discrete(3)})})
    with pytest.raises(UserError, match=r"'a\.b'.*more than one entry"):
        leaves(space)
