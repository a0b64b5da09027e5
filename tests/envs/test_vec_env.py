"""The gymnasium adapter: final_obs at episode ends, end flags, episode stats, action rescaling."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rltrain.config.schema import EnvConfig
from rltrain.envs.action_space import describe_action_space
from rltrain.envs.check import check_env_id
from rltrain.envs.make import make_env
from rltrain.envs.obs_space import array_tensor
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError


def col(x: torch.Tensor) -> list[float]:
    """A [N, 1] observation batch as a flat list."""
    return x[:, 0].tolist()


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_ended_rows_report_true_final_obs_reset_obs_and_end_flags(counter_env_id, vectorization):
    # CounterEnv: obs after step k is [k], reward k; action 1 terminates; time limit 3 truncates.
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=3,
                             vectorization=vectorization))
    try:
        assert col(env.reset(seed=0)) == [0.0, 0.0]

        res = env.step(torch.tensor([0, 0]))
        assert col(res.obs) == col(res.final_obs) == [1.0, 1.0]
        assert res.final_obs is res.obs  # no row ended: one tensor (one copy to a GPU, not two)
        assert res.reward.tolist() == [1.0, 1.0]
        assert not res.terminated.any() and not res.truncated.any()
        assert "episode" not in res.info

        res = env.step(torch.tensor([1, 0]))  # row 0 terminates at k=2
        assert res.final_obs is not res.obs
        assert col(res.final_obs) == [2.0, 2.0]  # row 0: its true last observation
        assert col(res.obs) == [0.0, 2.0]  # row 0: already the reset observation
        assert res.terminated.tolist() == [True, False]
        assert res.truncated.tolist() == [False, False]
        ep = res.info["episode"]
        assert ep["index"].tolist() == [0]
        assert ep["return"].tolist() == [1.0 + 2.0] and ep["length"].tolist() == [2]
        assert (ep["terminated"], ep["truncated"]) == (1, 0)

        res = env.step(torch.tensor([0, 0]))  # row 1 reaches the time limit at k=3
        assert col(res.final_obs) == [1.0, 3.0]
        assert col(res.obs) == [1.0, 0.0]
        assert res.terminated.tolist() == [False, False]
        assert res.truncated.tolist() == [False, True]
        ep = res.info["episode"]
        assert ep["index"].tolist() == [1]
        assert ep["return"].tolist() == [1.0 + 2.0 + 3.0] and ep["length"].tolist() == [3]
        assert (ep["terminated"], ep["truncated"]) == (0, 1)

        env.step(torch.tensor([0, 0]))
        res = env.step(torch.tensor([1, 0]))  # row 0: terminated at k=3, also the time limit
        assert res.terminated.tolist() == [True, False]
        assert res.truncated.tolist() == [False, False]  # a real termination never bootstraps
        assert col(res.final_obs) == [3.0, 2.0] and col(res.obs) == [0.0, 2.0]
        assert res.info["episode"]["return"].tolist() == [6.0]
        assert (res.info["episode"]["terminated"], res.info["episode"]["truncated"]) == (1, 0)
    finally:
        env.close()


def test_step_tensors_have_the_contract_dtypes(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=3))
    obs = env.reset(seed=0)
    res = env.step(torch.tensor([0, 1]))
    env.close()
    assert env.spec.obs_shape == (1,) and env.spec.num_envs == 2
    assert (env.spec.action_kind, env.spec.action_dim) == ("discrete", 2)
    assert obs.dtype == res.obs.dtype == res.final_obs.dtype == res.reward.dtype == torch.float32
    assert res.terminated.dtype == res.truncated.dtype == torch.bool
    assert res.obs.shape == res.final_obs.shape == (2, 1) and res.reward.shape == (2,)


class ActionEchoEnv(gym.Env):
    """Observes the action it last received, so a test can see what reached the env."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Box(np.array([-2.0, 0.0, -np.inf], np.float32),
                                  np.array([2.0, 10.0, np.inf], np.float32), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.asarray(action, np.float32), 0.0, False, False, {}


def echo_env() -> GymVecEnv:
    venv = SyncVectorEnv([ActionEchoEnv, ActionEchoEnv], autoreset_mode=AutoresetMode.SAME_STEP)
    return GymVecEnv(venv)


def test_box_actions_are_rescaled_from_unit_range_to_env_bounds():
    env = echo_env()
    env.reset(seed=0)
    # dims: [-2, 2], [0, 10], unbounded (passes through unchanged)
    res = env.step(torch.tensor([[-1.0, 1.0, 5.0], [0.0, 0.0, -7.0]]))
    assert res.obs.tolist() == [[-2.0, 10.0, 5.0], [0.0, 5.0, -7.0]]
    res = env.step(torch.tensor([[0.5, -0.5, 0.0], [-0.25, 0.75, 100.0]]))
    assert res.obs.tolist() == [[1.0, 2.5, 0.0], [-0.5, 8.75, 100.0]]
    env.close()


def test_box_actions_beyond_unit_range_are_clipped_to_env_bounds():
    env = echo_env()
    env.reset(seed=0)
    res = env.step(torch.tensor([[1.5, -3.0, 0.25], [-7.0, 2.0, -0.25]]))
    assert res.obs.tolist() == [[2.0, 0.0, 0.25], [-2.0, 10.0, -0.25]]
    env.close()


def test_pendulum_unit_action_reaches_max_torque():
    env = make_env(EnvConfig(id="Pendulum-v1", num_envs=1))
    assert (env.spec.action_kind, env.spec.action_dim) == ("box", 1)
    out = env.to_env_action(torch.tensor([[1.0]]))
    env.close()
    assert out.dtype == np.float32 and out.tolist() == [[2.0]]


def test_reset_with_the_same_seed_gives_the_same_observations():
    cfg = EnvConfig(id="CartPole-v1", num_envs=2)
    envs = [make_env(cfg) for _ in range(3)]
    a, b, c = envs[0].reset(seed=3), envs[1].reset(seed=3), envs[2].reset(seed=4)
    for env in envs:
        env.close()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert not torch.equal(a[0], a[1])  # row i is seeded with seed + i


def test_unknown_env_id_suggests_the_closest_registered_ids():
    with pytest.raises(UserError, match=r"unknown env 'CartPole-v2': did you mean .*CartPole-v1"):
        check_env_id("CartPole-v2")


def test_unsupported_action_space_is_a_user_error_naming_the_space():
    with pytest.raises(UserError, match="MultiDiscrete"):
        describe_action_space(gym.spaces.MultiDiscrete([[2, 3], [2, 2]]))  # 2-D
    with pytest.raises(UserError, match="Tuple"):
        describe_action_space(gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2))
    assert describe_action_space(gym.spaces.Discrete(5)) == ("discrete", 5)
    assert describe_action_space(gym.spaces.Box(-1, 1, (3,))) == ("box", 3)
    assert describe_action_space(gym.spaces.MultiDiscrete([2, 3])) == ("multi_discrete", 2)
    assert describe_action_space(gym.spaces.MultiBinary(4)) == ("multi_binary", 4)


def test_array_tensor_converts_like_as_tensor_and_copies_what_it_cannot_share():
    """`array_tensor` shares memory with an array of the asked dtype (as `torch.as_tensor`
    does), converts the others, and copies a read-only or reversed array instead of warning
    or failing."""
    cpu = torch.device("cpu")
    shared = np.arange(4, dtype=np.float32)
    t = array_tensor(shared, np.float32, cpu)
    shared[0] = 7.0
    assert t.dtype == torch.float32 and t[0] == 7.0  # the same memory, as as_tensor gives
    converted = array_tensor(np.array([1.5, 2.5]), np.float32, cpu)
    assert converted.dtype == torch.float32 and converted.tolist() == [1.5, 2.5]
    assert array_tensor(np.array([True, False]), np.bool_, cpu).dtype == torch.bool
    read_only = np.ones(3, dtype=np.float32)
    read_only.flags.writeable = False
    reversed_rows = np.arange(6, dtype=np.float32).reshape(3, 2)[::-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert array_tensor(read_only, np.float32, cpu).tolist() == [1.0, 1.0, 1.0]
        assert array_tensor(reversed_rows, np.float32, cpu).tolist() == [[4, 5], [2, 3], [0, 1]]
        # one row reversed: numpy calls it contiguous, its stride is still negative
        assert array_tensor(np.ones(1, np.float32)[::-1], np.float32, cpu).tolist() == [1.0]


@pytest.mark.parametrize("space", [gym.spaces.Box(-1.0, 1.0, (), np.float32),
                                   gym.spaces.Dict({"x": gym.spaces.Box(0.0, 1.0, (), np.float32)})])
def test_a_0_dimensional_box_observation_is_refused_in_one_line(space):
    """obs.flatten(1) failed on it with an IndexError deep in the network."""
    from rltrain.envs.obs_space import leaves

    with pytest.raises(UserError, match=r"is 0-dimensional: give it shape \(1,\)"):
        leaves(space)


class OldGymReset(gym.Env):
    """gym < 0.26's API: reset() returns the observation alone."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32)


def test_an_env_on_the_old_gym_api_is_one_line_naming_gymnasiums():
    from rltrain.errors import EnvError

    env = make_env(EnvConfig(id="tests.envs.test_vec_env:OldGymReset", num_envs=1), num_envs=1)
    with pytest.raises(EnvError) as err:
        env.reset(seed=0)
    env.close()
    message = str(err.value)
    assert message.startswith("env tests.envs.test_vec_env:OldGymReset raised ValueError in "
                              "reset(): too many values to unpack")
    assert message.endswith("(gymnasium's API: reset() returns (obs, info), step() returns "
                            "(obs, reward, terminated, truncated, info))")
