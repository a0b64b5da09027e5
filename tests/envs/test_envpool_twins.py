"""EnvPool's envs against gymnasium's (`rltrain/envs/engines/twins.py` keeps the table these
tests check): spaces, time limits, reset ranges and dynamics transition by transition, and
seeds beyond int32 on EnvPool. Skips where EnvPool is not installed; CI runs it from the wheel
(`make test-wheel`). Ids whose gymnasium env needs MuJoCo or Box2D skip without them."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

envpool = pytest.importorskip("envpool")

from rltrain.envs.config import EnvConfig  # noqa: E402
from rltrain.envs.engines.envpool import make_envpool  # noqa: E402
from rltrain.envs.engines.twins import NOT_TWINS, SPACES_DIFFER, TWINS  # noqa: E402
from rltrain.envs.families import family_of  # noqa: E402
from rltrain.errors import UserError  # noqa: E402


def _gym(env_id: str) -> gym.Env:
    """gymnasium's `env_id` (skips where its family's extra is missing)."""
    need = {"mujoco": "mujoco", "box2d": "Box2D"}.get(family_of(env_id) or "")
    if need and importlib.util.find_spec(need) is None:
        pytest.skip(f"gymnasium's {env_id} needs {need}")
    return gym.make(env_id)


def _pool(env_id: str, n: int, limit: int | None = None):
    return make_envpool(EnvConfig(id=env_id, backend="envpool", num_envs=n,
                                  max_episode_steps=limit), n)


def _same_space(a: gym.Space, b: gym.Space) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, gym.spaces.Box):
        return (a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.low, b.low)
                and np.array_equal(a.high, b.high))
    return a == b


@pytest.mark.parametrize("env_id", sorted(TWINS | set(NOT_TWINS) | set(SPACES_DIFFER)))
def test_spaces_and_time_limits_are_gymnasiums_except_where_recorded(env_id):
    ref = _gym(env_id)
    if env_id in SPACES_DIFFER:  # refused by rltrain: EnvPool's own env
        with pytest.raises(UserError, match=f"EnvPool's {env_id} .*env.backend=gymnasium"):
            _pool(env_id, 1)
        pool = envpool.make_gymnasium(env_id, num_envs=1)
        spaces, limit = (pool.observation_space, pool.action_space), pool.spec.config
    else:
        pool = _pool(env_id, 1)
        spaces = (pool.single_observation_space, pool.single_action_space)
        limit = pool.engine.spec.config
    same = (_same_space(ref.observation_space, spaces[0])
            and _same_space(ref.action_space, spaces[1]))
    assert same == (env_id not in SPACES_DIFFER), (ref.observation_space, spaces[0])
    assert limit.max_episode_steps == (ref.spec.max_episode_steps or 2**31 - 1)  # int32: none
    pool.close()


def _angle(sin: float, cos: float) -> float:
    return float(np.arctan2(sin, cos))


def _classic(state_of):
    """Put a classic-control env in the state its observation gives."""
    def put(env, obs):
        env.state = np.asarray(state_of(obs), np.float64)
        if hasattr(env, "steps_beyond_terminated"):  # CartPole: a fresh episode
            env.steps_beyond_terminated = None
        return True
    return put


def _mujoco(hidden: int, clipped: bool = False):
    """Put a MuJoCo env in the state of an observation `qpos[hidden:], qvel, ...` (the hidden x, y
    do not change the dynamics); False where it clips a velocity at 10 (no state given)."""
    def put(env, obs):
        nq, nv = env.model.nq, env.model.nv
        qpos = np.zeros(nq)
        qpos[hidden:] = obs[:nq - hidden]
        qvel = obs[nq - hidden:nq - hidden + nv]
        env.set_state(qpos, qvel)
        return not clipped or np.abs(qvel).max() < 10
    return put


def _double_pendulum(env, obs):
    qvel = obs[5:8]
    env.set_state(np.array([obs[0], _angle(obs[1], obs[3]), _angle(obs[2], obs[4])]), qvel)
    return np.abs(qvel).max() < 10


def _reacher(env, obs):
    env.set_state(np.array([_angle(obs[2], obs[0]), _angle(obs[3], obs[1]), obs[4], obs[5]]),
                  np.array([obs[6], obs[7], 0.0, 0.0]))
    return True


PUT_STATE = {
    "CartPole-v1": _classic(lambda o: o),
    "MountainCar-v0": _classic(lambda o: o),
    "MountainCarContinuous-v0": _classic(lambda o: o),
    "Acrobot-v1": _classic(lambda o: [_angle(o[1], o[0]), _angle(o[3], o[2]), o[4], o[5]]),
    "Pendulum-v1": _classic(lambda o: [_angle(o[1], o[0]), o[2]]),
    "HalfCheetah-v5": _mujoco(1), "Hopper-v5": _mujoco(1, clipped=True),
    "Walker2d-v5": _mujoco(1, clipped=True), "Swimmer-v5": _mujoco(2), "Ant-v5": _mujoco(2),
    "InvertedPendulum-v5": lambda env, o: env.set_state(o[:2], o[2:4]) or True,
    "InvertedDoublePendulum-v5": _double_pendulum, "Reacher-v5": _reacher,
}
"""How gymnasium's env is put in the state of EnvPool's observation, per id."""

PUSH = {  # actions that end episodes by termination where random ones rarely do
    "MountainCar-v0": lambda o: np.where(o[:, 1] > 0, 2, 0),
    "MountainCarContinuous-v0": lambda o: np.sign(o[:, 1:2]).astype(np.float32),
    "Acrobot-v1": lambda o: np.where(o[:, 4] > 0, 2, 0),
    "CartPole-v1": lambda o: (o[:, 2] + 0.5 * o[:, 3] > 0).astype(np.int64),  # balances
    "Pendulum-v1": lambda o: np.sign(o[:, 2:3]).astype(np.float32) * 2,  # spins to |θ̇| = 8
}


def _compare(env_id: str, steps: int, limit: int | None) -> dict[str, float]:
    """Step EnvPool's `env_id` and gymnasium's, the latter put in EnvPool's state before each
    step, with the same actions (half the rows random, half `PUSH`ed); the worst relative
    differences, the episodes ended each way, and the transitions compared."""
    n = 4
    pool, space = _pool(env_id, n, limit), _gym(env_id).action_space
    refs = [_gym(env_id).unwrapped for _ in range(n)]
    for row, ref in enumerate(refs):
        ref.reset(seed=row)
    space.seed(0)
    obs, _ = pool.reset(seed=0)
    out = {"obs": 0.0, "reward": 0.0, "flags": 0, "terminated": 0, "truncated": 0, "compared": 0}
    length = np.zeros(n, dtype=int)
    for _ in range(steps):
        action = np.stack([space.sample() for _ in range(n)])
        if env_id in PUSH:
            action[: n // 2] = PUSH[env_id](obs[: n // 2]).astype(action.dtype)
        exact = [PUT_STATE[env_id](refs[row], obs[row]) for row in range(n)]
        obs, reward, terminated, truncated, info = pool.step(action)
        last, length = info.get("final_obs", obs), length + 1
        for row in np.flatnonzero(exact):
            ref_obs, ref_reward, ref_term, _, _ = refs[row].step(action[row])
            out["obs"] = max(out["obs"], float(np.max(np.abs(last[row] - ref_obs)
                                                      / (1 + np.abs(ref_obs)))))
            out["reward"] = max(out["reward"], abs(reward[row] - ref_reward) / (1 + abs(ref_reward)))
            out["flags"] += bool(terminated[row]) != ref_term
            out["compared"] += 1
        assert (truncated == ((length == limit) & ~terminated)).all()
        out["terminated"] += int(terminated.sum())
        out["truncated"] += int(truncated.sum())
        length[terminated | truncated] = 0
    pool.close()
    return out


@pytest.mark.parametrize("env_id", sorted(TWINS))
def test_a_twin_steps_gymnasiums_dynamics_transition_by_transition(env_id):
    """Every transition of a twin agrees with gymnasium's to float rounding: observation,
    reward, termination; the time limit (here 60 steps) truncates at the same step."""
    got = _compare(env_id, steps=150, limit=60)
    assert got["compared"] >= 100, got
    assert got["obs"] < 1e-6 and got["reward"] < 1e-6 and got["flags"] == 0, got
    assert got["terminated"] + got["truncated"] >= 2, got


@pytest.mark.parametrize("env_id", sorted(set(NOT_TWINS) & set(PUT_STATE)))
def test_an_env_recorded_as_different_still_differs(env_id):
    """Pendulum's angle at |θ̇| = 8, Ant's contact forces: should EnvPool change, move the id
    to `TWINS` (and this test says so)."""
    got = _compare(env_id, steps=150, limit=None)
    assert got["obs"] > 1e-3 or got["reward"] > 1e-3, f"{env_id} now matches: {got}"


@pytest.mark.parametrize("env_id", sorted(TWINS))
def test_a_twins_resets_fall_in_gymnasiums_reset_range(env_id):
    ref = _gym(env_id)
    starts = np.stack([ref.reset(seed=s)[0] for s in range(200)])
    pool = _pool(env_id, 200)
    mine, _ = pool.reset(seed=0)
    pool.close()
    sd = starts.std(0)  # 200 draws each: 5 standard errors of margin
    assert (np.abs(mine.mean(0) - starts.mean(0)) <= 0.5 * sd + 1e-6).all()
    assert (mine.std(0) >= 0.7 * sd - 1e-6).all() and (mine.std(0) <= 1.4 * sd + 1e-6).all()


def test_seeds_beyond_int32_train_a_seed_batch_and_evaluate(tmp_path):
    """rltrain's seeds run to 2**32 - 1; EnvPool asserts int32 ones: mapped, on every path."""
    import rltrain

    common = ["algo=ppo", "env=CartPole-v1", "env.backend=envpool", "env.num_envs=4",
              "algo.n_steps=16", "algo.batch_size=64", "total_timesteps=128", "eval.freq=0",
              "checkpoint.freq=0", "progress=off"]
    rltrain.train([*common, "seed=2147483640"], run_dir=tmp_path / "one")
    rltrain.train([*common, "num_seeds=2", f"seed={2**32 - 2}"], run_dir=tmp_path / "batch")
    result = rltrain.evaluate(tmp_path / "one" / "checkpoints" / "final.pt", episodes=2,
                              seed=2**32 - 1, write=False)
    assert result["episodes"] == 2 and result["mean_reward"] > 0
