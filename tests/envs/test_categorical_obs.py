"""Categorical observations (Discrete, MultiDiscrete, MultiBinary) for every algorithm: a few
hundred steps of training, eval, a checkpoint round trip and an exact resume; the one-hot
encoder on tiny known cases; storage as int64; the refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.registry import ALGOS
from rltrain.config.validation import to_train_config
from rltrain.envs.trust import NamedCode
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import EnvError, UserError
from rltrain.nets.encoder import OneHot
from rltrain.runner.runner import Runner
from tests.envs.small_runs import assert_evaluates_and_resumes_exactly, final_weights, small_run

TRUSTED = NamedCode(frozenset({"tests.envs.space_envs"}))  # as env.import= on the command line
ENVS = ["DiscreteObs", "MultiDiscreteObs", "MultiBinaryObs"]
NVEC = {"DiscreteObs": (4,), "MultiDiscreteObs": (3, 4), "MultiBinaryObs": (2, 2, 2)}


def overrides(env_class: str, algo: str, steps: int = 192, *extra: str) -> list[str]:
    return small_run(algo, f"tests.envs.space_envs:{env_class}", steps, *extra)


@pytest.mark.parametrize("env_class", ENVS)
@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_every_algo_trains_evaluates_reloads_and_resumes_on_categorical_obs(algo, env_class,
                                                                            tmp_path):
    cfg = compose_train_config(overrides(env_class, algo))
    runner = Runner(cfg, tmp_path / "a")
    assert runner.env.spec.obs_nvec == NVEC[env_class]
    result = runner.run()
    assert result["episodes"] == 2 and np.isfinite(result["mean_reward"])
    if runner.replay is not None:  # the replay keeps the integers, not one-hot floats
        assert runner.replay.obs.dtype == torch.int64
        assert runner.replay.obs.shape[1:] == (len(NVEC[env_class]),)
    assert_evaluates_and_resumes_exactly(tmp_path / "a", tmp_path, TRUSTED)


def test_one_hot_concatenates_one_block_per_entry():
    encoder = OneHot((3, 4, 2))
    x = torch.tensor([[0, 0, 0], [2, 3, 1], [1, 2, 0]])
    expected = torch.tensor([[1, 0, 0, 1, 0, 0, 0, 1, 0],
                             [0, 0, 1, 0, 0, 0, 1, 0, 1],
                             [0, 1, 0, 0, 0, 1, 0, 1, 0]], dtype=torch.float32)
    assert torch.equal(encoder(x), expected)
    assert list(encoder.state_dict()) == []  # no parameters, nothing in checkpoints


def test_the_adapter_counts_entries_from_zero_and_refuses_values_outside_the_space():
    from tests.envs.space_envs import DiscreteObs

    def vec(bad: bool = False):
        return gym.vector.SyncVectorEnv([lambda: DiscreteObs(bad=bad)] * 2,
                                        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)

    env = GymVecEnv(vec())
    obs = env.reset(seed=0)
    assert obs.dtype == torch.int64 and obs.shape == (2, 1)
    assert int(obs.min()) >= 0 and int(obs.max()) <= 3  # Discrete(4, start=3): start removed
    bad = GymVecEnv(vec(bad=True), name="tests.envs.space_envs:DiscreteObs")
    bad.reset(seed=0)
    with pytest.raises(EnvError, match="outside its space"):
        bad.step(torch.zeros(2, dtype=torch.long))


def test_normalizing_categorical_observations_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="one-hot encodes"):
        Runner(compose_train_config(overrides("DiscreteObs", "ppo", 64, "env.normalize_obs=true")),
               tmp_path)


def test_frame_stacking_categorical_observations_repeats_their_categories(tmp_path):
    runner = Runner(compose_train_config(overrides("MultiDiscreteObs", "ppo", 64,
                                                   "env.frame_stack=3")), tmp_path)
    assert runner.env.spec.obs_nvec == (3, 4) * 3
    assert runner.run()["episodes"] == 2


@pytest.mark.parametrize("env_id, kwargs", [
    ("FrozenLake-v1", ()),
    ("CliffWalking-v1", ("env.max_episode_steps=50",)),  # it has no time limit of its own
    ("Taxi-v4", ()),
])
def test_gymnasium_toy_text_envs_resume_exactly_mid_episode(env_id, kwargs, tmp_path):
    """Slippery FrozenLake draws its moves from `np_random`: the snapshot must carry it. Taxi
    gives `info["action_mask"]`: the mask of the observation the run stopped at must come back
    too (no env call recomputes it), or the resumed run acts under the reset state's mask."""
    steps = 256
    cfg = compose_train_config([
        "algo=ppo", f"env.id={env_id}", "env.num_envs=2", f"total_timesteps={steps}",
        "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=2", "algo.hidden_sizes=[16]",
        "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off",
        f"checkpoint.freq={steps // 2}", *kwargs])
    Runner(cfg, tmp_path / "a").run()
    half = checkpoint.load(sorted((tmp_path / "a" / "checkpoints").glob("step_*.pt"))[0])
    assert half["env"].get("sim") is not None, "the simulator state was not saved"
    Runner(to_train_config(half["config"]), tmp_path / "r", resume_from=half).run()
    a, r = final_weights(tmp_path / "a"), final_weights(tmp_path / "r")
    assert all(torch.equal(a[k], r[k]) for k in a)
