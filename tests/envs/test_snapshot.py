"""Env state in checkpoints: all or nothing per env.

Envs whose whole state rltrain can capture (classic control, PixelCartPole, user envs with the
state protocol, wrappers of plain data) continue exactly through a checkpoint file; any other
env (Box2D, MuJoCo, unknown user envs, async vector envs) saves no episode state at all, and a
snapshot that does not fit is never written back in part.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import EnvConfig, WrapperConfig
from rltrain.envs import snapshot
from rltrain.envs.make import capture_problem, load_resume_state, make_env, resume_state
from rltrain.envs.native import CartPole
from tests.e2e.harness import assert_refused, run_cli
from tests.envs import state_envs
from tests.envs.state_envs import DTYPES

CAPTURED = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0",
            "Acrobot-v1", "rltrain.envs.pixels:PixelCartPole", state_envs.DRIFT_ID]


@pytest.fixture(autouse=True, scope="module")
def _user_envs():
    state_envs.register()


def actions_for(env, k: int, seed: int) -> list[torch.Tensor]:
    """`k` fixed random actions for `env` (discrete indices or [-1, 1] boxes)."""
    g = torch.Generator().manual_seed(seed)
    n, spec = env.spec.num_envs, env.spec
    if spec.action_kind == "discrete":
        return [torch.randint(0, spec.action_dim, (n,), generator=g) for _ in range(k)]
    return [torch.rand(n, spec.action_dim, generator=g) * 2 - 1 for _ in range(k)]


def through_file(state: dict, tmp_path) -> dict:
    """`state` written in a checkpoint and read back, as a resume reads it."""
    path = checkpoint.save({"config": {}, "env": state}, tmp_path / "latest.pt")
    return checkpoint.load(path)["env"]


def make(env_id: str, n: int = 2, **kw):
    cfg = EnvConfig(id=env_id, num_envs=n, max_episode_steps=kw.pop("steps", 30), **kw)
    return make_env(cfg)


@pytest.mark.parametrize("env_id", CAPTURED)
def test_a_captured_env_continues_exactly_through_a_checkpoint_file(env_id, tmp_path):
    env = make(env_id, normalize_reward=True)
    env.reset(seed=0)
    for a in actions_for(env, 7, 1):
        env.step(a)
    assert capture_problem(env) is None
    saved = through_file(resume_state(env), tmp_path)
    assert saved["sim"]["version"] == snapshot.VERSION
    other = make(env_id, normalize_reward=True)
    other.reset(seed=123)  # another episode everywhere: all of it must be overwritten
    assert load_resume_state(other, saved)
    for a in actions_for(env, 60, 2):  # 60 > 30: crosses time limits and resets
        x, y = env.step(a), other.step(a)
        assert torch.equal(x.obs, y.obs) and torch.equal(x.reward, y.reward)
        assert torch.equal(x.terminated, y.terminated) and torch.equal(x.truncated, y.truncated)
        assert torch.equal(x.final_obs, y.final_obs)


def test_numpy_attributes_of_every_dtype_come_back_with_their_dtypes(tmp_path):
    wrapper = WrapperConfig(name="tests.envs.state_envs:DtypeWrapper")
    env = make("CartPole-v1", wrappers=[wrapper])
    env.reset(seed=0)
    for a in actions_for(env, 3, 0):
        env.step(a)
    saved = through_file(resume_state(env), tmp_path)
    other = make("CartPole-v1", wrappers=[wrapper])
    other.reset(seed=5)
    assert load_resume_state(other, saved)
    for mine, theirs in zip(env.venv.envs, other.venv.envs, strict=True):
        for d in DTYPES:
            for name in (f"ws_{d}", f"wz_{d}", f"wv_{d}"):
                a, b = getattr(mine, name), getattr(theirs, name)
                assert type(a) is type(b) and a.dtype == b.dtype == np.dtype(d), name
                assert np.array_equal(a, b), name


@pytest.mark.parametrize(("env_id", "words"), [
    ("LunarLander-v3", "LunarLander from gymnasium.envs.box2d"),
    ("InvertedPendulum-v5", "InvertedPendulumEnv from gymnasium.envs.mujoco"),
    (state_envs.OPAQUE_ID, "OpaqueDriftEnv from tests.envs.state_envs has no sim_state()"),
])
def test_an_env_rltrain_cannot_capture_saves_no_episode_state(env_id, words):
    pytest.importorskip("Box2D" if "Lunar" in env_id else "mujoco" if "Pend" in env_id else "numpy")
    env = make(env_id, normalize_obs=True, normalize_reward=True)
    env.reset(seed=0)
    for a in actions_for(env, 5, 0):
        env.step(a)
    assert words in capture_problem(env)
    assert set(resume_state(env)) == {"obs_rms", "ret_rms"}  # statistics only: no episode part


def test_async_envs_and_wrappers_holding_objects_are_not_captured():
    async_env = make("CartPole-v1", vectorization="async")
    assert "AsyncVectorEnv keeps its envs in other processes" in capture_problem(async_env)
    async_env.close()
    stacked = make("CartPole-v1", wrappers=[WrapperConfig(name="FrameStackObservation",
                                                          kwargs={"stack_size": 2})])
    assert "FrameStackObservation.obs_queue is a deque" in capture_problem(stacked)


def saved_of(env_id: str, tmp_path, n: int = 2) -> dict:
    env = make(env_id, n)
    env.reset(seed=0)
    for a in actions_for(env, 4, 0):
        env.step(a)
    return through_file(resume_state(env), tmp_path)


def time_limits(env) -> list[int]:
    return [e._elapsed_steps for e in env.venv.envs]


@pytest.mark.parametrize("damage", ["cartpole_state_shape", "np_random", "extra_attribute",
                                    "fewer_envs", "no_version", "episode_return_rows"])
def test_a_snapshot_that_does_not_fit_changes_nothing(damage, tmp_path):
    saved = saved_of("CartPole-v1", tmp_path)
    layers = saved["sim"]["envs"][1]  # the last env's layers: earlier ones fit
    if damage == "cartpole_state_shape":
        layers[-1]["attrs"]["state"]["array"] = torch.zeros(3, dtype=torch.float64)
    elif damage == "np_random":
        layers[-1]["attrs"]["_np_random"]["__generator__"]["state"] = "?"
    elif damage == "extra_attribute":
        layers[0]["attrs"]["surprise"] = 1
    elif damage == "fewer_envs":
        saved["sim"]["envs"].pop()
    elif damage == "no_version":  # a snapshot of rltrain 0.1, which could be partial
        del saved["sim"]["version"]
    else:
        saved["episode_return"] = torch.zeros(3, dtype=torch.float64)
    env = make("CartPole-v1")
    env.reset(seed=9)
    env.step(torch.tensor([0, 1]))
    before = ([e.unwrapped.state.copy() for e in env.venv.envs], time_limits(env),
              env.episode_return.copy())
    result = load_resume_state(env, saved)
    assert not result and result.reason
    assert all(np.array_equal(a, e.unwrapped.state) for a, e in zip(before[0], env.venv.envs,
                                                                    strict=True))
    assert time_limits(env) == before[1] == [1, 1]
    assert np.array_equal(env.episode_return, before[2])


def test_old_snapshots_say_so():
    env = make("CartPole-v1")
    env.reset(seed=0)
    reason = load_resume_state(env, {"sim": {"vector": {}, "envs": []},
                                     "episode_return": torch.zeros(2, dtype=torch.float64),
                                     "episode_length": torch.zeros(2, dtype=torch.long)}).reason
    assert reason.startswith("the checkpoint holds no complete simulator state")


@pytest.mark.parametrize("damage", ["missing", "short_generator", "float_generator", "rows"])
def test_native_env_refuses_a_malformed_sim_state_without_changing_anything(damage):
    env = CartPole(2)
    env.reset(seed=0)
    saved = env.sim_state()
    if damage == "missing":
        del saved["elapsed"]
    elif damage == "short_generator":
        saved["generator"] = saved["generator"][:10]
    elif damage == "float_generator":
        saved["generator"] = saved["generator"].float()
    else:
        saved["elapsed"] = torch.zeros(3, dtype=torch.long)
    other = CartPole(2)
    other.reset(seed=1)
    before = other.get_state()
    assert not other.load_sim_state(saved)
    assert torch.equal(other.get_state(), before)


def test_encode_keeps_every_numeric_dtype_and_refuses_nothing_silently():
    values = {d: [np.dtype(d).type(1), np.array(np.dtype(d).type(1)), np.ones(2, dtype=d)]
              for d in DTYPES}
    values["big_endian"] = [np.arange(3, dtype=">i4")]
    back = snapshot.decode(checkpoint.to_plain(snapshot.encode(values)))
    for key, items in values.items():
        for a, b in zip(items, back[key], strict=True):
            assert type(a) is type(b) and a.dtype == b.dtype and np.array_equal(a, b), key


@pytest.mark.parametrize("env_class, rc, fragment", [
    ("DequeStateEnv", 2, "checkpoints cannot hold its state (sim.envs[0][0].sim_state.recent: "
                         "collections.deque is not plain data); sim_state() must return numbers"),
    ("RaisingStateEnv", 1, "taking its state for checkpoints failed: KeyError: 'position'")])
def test_a_sim_state_no_checkpoint_can_hold_stops_the_run_before_its_first_step(
        env_class, rc, fragment, tmp_path, monkeypatch, capfd):
    """It used to stop at the first checkpoint (50,000 steps in, by default), or with a
    traceback when `sim_state()` raised; now the run never starts, in one line."""
    result = run_cli(["algo=ppo", f"env.id=tests.envs.state_envs:{env_class}",
                      "env.import=tests.envs.state_envs", "total_timesteps=256",
                      "algo.n_steps=32", "env.num_envs=2", "progress=off", "logger=none",
                      "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert_refused(result, rc, f"env tests.envs.state_envs:{env_class}: {fragment}")
    assert not (tmp_path / "run" / "checkpoints").exists()
