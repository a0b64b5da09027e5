"""Native batched torch CartPole / Pendulum (`env.backend=torch`): gymnasium's dynamics step for
step, the VecEnv contract (autoreset, final_obs, episode info, time limits), state, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.config.schema import EnvConfig
from rltrain.envs.make import load_resume_state, make_env, resume_state
from rltrain.envs.native import CartPole, NativeVecEnv, Pendulum, make_native
from rltrain.envs.normalize import NormalizeObs
from rltrain.envs.vec_env import GymVecEnv
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.runner.runner import Runner

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def random_actions(env_id: str, n: int, g: torch.Generator) -> torch.Tensor:
    """CartPole: indices; Pendulum: [-1.2, 1.2] (a little outside [-1, 1], to test the clip)."""
    if env_id == "CartPole-v1":
        return torch.randint(0, 2, (n,), generator=g)
    return torch.rand(n, 1, generator=g) * 2.4 - 1.2


def gym_states(env: GymVecEnv, rows) -> np.ndarray:
    """The float64 simulator state of some rows of a gymnasium vector env."""
    return np.stack([env.venv.envs[int(i)].unwrapped.state for i in rows])


def assert_close(a: torch.Tensor, b: torch.Tensor, atol: float) -> None:
    torch.testing.assert_close(a.double(), b.double(), atol=atol, rtol=1e-6)


@pytest.mark.parametrize(("env_id", "limit", "dtype", "steps", "atol"), [
    ("CartPole-v1", None, "float32", 400, 1e-4),  # short random episodes: float32 stays within 1e-5
    ("CartPole-v1", 12, "float32", 200, 1e-4),  # time limit and termination mixed
    ("Pendulum-v1", None, "float64", 450, 1e-5),  # 200-step episodes, truncated twice
    ("Pendulum-v1", 30, "float32", 300, 1e-4),
])
def test_native_env_matches_gymnasium_step_for_step(env_id, limit, dtype, steps, atol):
    n = 4
    ref = make_env(EnvConfig(id=env_id, num_envs=n, max_episode_steps=limit), training=False)
    native = make_native(env_id, n, max_episode_steps=limit, dtype=dtype)
    expected_obs = ref.reset(seed=0)
    native.reset(seed=0)
    native.set_state(gym_states(ref, range(n)))  # reset randomness differs: start from gym's states
    assert_close(native.observe(native.get_state()), expected_obs, atol)
    g = torch.Generator().manual_seed(0)
    ends = 0
    for _ in range(steps):
        action = random_actions(env_id, n, g)
        want, got = ref.step(action), native.step(action)
        assert_close(got.final_obs, want.final_obs, atol)
        assert_close(got.reward, want.reward, atol * 100)  # Pendulum costs reach 16
        assert torch.equal(got.terminated, want.terminated)
        assert torch.equal(got.truncated, want.truncated)
        ended = (want.terminated | want.truncated).nonzero().squeeze(1)
        assert ("episode" in got.info) == ("episode" in want.info) == (len(ended) > 0)
        if len(ended):
            ours, theirs = got.info["episode"], want.info["episode"]
            np.testing.assert_array_equal(ours["index"], theirs["index"])
            np.testing.assert_array_equal(ours["length"], theirs["length"])
            np.testing.assert_allclose(ours["return"], theirs["return"], atol=atol * 1e3)
            assert (ours["terminated"], ours["truncated"]) == (theirs["terminated"], theirs["truncated"])
            ends += len(ended)
        running = ~(want.terminated | want.truncated)
        assert_close(got.obs[running], want.obs[running], atol)
        if len(ended):  # both reset those rows, from different random draws: re-sync them
            native.set_state(gym_states(ref, ended), ended)
    assert ends >= n  # every row went through at least one reset
    if limit is not None:
        assert ref.venv.envs[0].spec.max_episode_steps == limit


def test_float32_pendulum_matches_gymnasium_on_every_single_transition():
    # float32 rounding drifts over a long episode (see NativeVecEnv); each transition is exact.
    n = 8
    ref = make_env(EnvConfig(id="Pendulum-v1", num_envs=n), training=False)
    native = make_native("Pendulum-v1", n)
    ref.reset(seed=1)
    native.reset(seed=1)
    g = torch.Generator().manual_seed(1)
    for _ in range(199):
        native.set_state(gym_states(ref, range(n)))
        action = random_actions("Pendulum-v1", n, g)
        want, got = ref.step(action), native.step(action)
        assert_close(got.final_obs, want.final_obs, 2e-6)
        assert_close(got.reward, want.reward, 2e-5)


def step_n(env: NativeVecEnv, k: int, action: torch.Tensor) -> list:
    return [env.step(action) for _ in range(k)]


@pytest.mark.parametrize("device", DEVICES)
def test_ended_rows_return_final_obs_reset_obs_and_gymvecenv_episode_info(device):
    env = CartPole(2, device, max_episode_steps=5)
    env.reset(seed=0)
    # row 0: at the right edge moving right -> terminates on the next step; row 1 near rest
    env.set_state(torch.tensor([[2.39, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]))
    res = env.step(torch.tensor([1, 0], device=device))
    assert res.terminated.tolist() == [True, False] and res.truncated.tolist() == [False, False]
    assert res.final_obs[0, 0].item() == pytest.approx(2.39 + 0.02 * 1.0)  # x += tau * x_dot
    assert res.obs[0].abs().max() <= 0.05  # already the reset observation
    assert torch.equal(res.obs[1], res.final_obs[1])
    assert res.reward.tolist() == [1.0, 1.0]  # the terminating step pays 1, as in gymnasium
    ep = res.info["episode"]
    assert isinstance(ep["index"], np.ndarray) and ep["index"].dtype == np.int64
    assert ep["index"].tolist() == [0] and ep["length"].tolist() == [1]
    assert ep["return"].dtype == np.float64 and ep["return"].tolist() == [1.0]
    assert (ep["terminated"], ep["truncated"]) == (1, 0)
    assert all(type(ep[k]) is int for k in ("terminated", "truncated"))
    results = step_n(env, 4, torch.tensor([0, 1], device=device))
    assert [("episode" in r.info) for r in results] == [False, False, False, True]
    last = results[-1]
    assert last.truncated.tolist() == [False, True] and not last.terminated.any()
    assert last.info["episode"]["index"].tolist() == [1]
    assert last.info["episode"]["length"].tolist() == [5]  # row 1's time limit
    assert last.info["episode"]["return"].tolist() == [5.0]
    for r in (res, last):
        for t in (r.obs, r.reward, r.terminated, r.truncated, r.final_obs):
            assert t.device == env.device
        assert (r.obs.dtype, r.reward.dtype, r.terminated.dtype) == (
            torch.float32, torch.float32, torch.bool)


def test_without_episode_info_a_step_has_no_host_sync_and_the_same_transitions():
    envs = [CartPole(3), CartPole(3)]
    envs[1].episode_info = False  # resets drawn every step, chosen with torch.where
    start = torch.tensor([[2.39, 1.0, 0.0, 0.0], [0.0, 0.1, 0.0, 0.0], [0.0, 0.0, 0.2, 1.0]])
    for env in envs:
        env.reset(seed=0)
        env.set_state(start)
    a, b = (env.step(torch.tensor([1, 0, 1])) for env in envs)
    assert a.terminated.tolist() == b.terminated.tolist() == [True, False, True]
    assert torch.equal(a.final_obs, b.final_obs) and torch.equal(a.reward, b.reward)
    assert torch.equal(a.obs[1], b.obs[1]) and "episode" in a.info and b.info == {}
    assert b.obs[[0, 2]].abs().max() <= 0.05  # the ended rows restarted all the same
    assert envs[1].elapsed.tolist() == [0, 1, 0]


def test_termination_at_the_time_limit_is_reported_as_termination_only():
    env = CartPole(1, max_episode_steps=1)
    env.reset(seed=0)
    env.set_state(torch.tensor([[2.39, 1.0, 0.0, 0.0]]))
    res = env.step(torch.tensor([1]))
    assert (res.terminated.item(), res.truncated.item()) == (True, False)
    assert (res.info["episode"]["terminated"], res.info["episode"]["truncated"]) == (1, 0)


def test_sutton_barto_reward_and_pendulum_gravity_are_forwarded_as_kwargs():
    env = make_env(EnvConfig(id="CartPole-v1", backend="torch", num_envs=1,
                             kwargs={"sutton_barto_reward": True}))
    env.reset(seed=0)
    assert env.step(torch.tensor([0])).reward.item() == 0.0
    env.set_state(torch.tensor([[2.39, 1.0, 0.0, 0.0]]))
    assert env.step(torch.tensor([1])).reward.item() == -1.0
    moon = make_native("Pendulum-v1", 1, g=1.6)
    moon.reset(seed=0)
    moon.set_state(torch.tensor([[1.0, 0.0]]))  # th=1 rad, at rest; torque 0 (action 0)
    thdot = moon.step(torch.zeros(1, 1)).final_obs[0, 2].item()
    assert thdot == pytest.approx(3 * 1.6 / 2 * np.sin(1.0) * 0.05, rel=1e-5)


@pytest.mark.parametrize("cls", [CartPole, Pendulum])
def test_resets_are_uniform_in_gymnasium_ranges_and_seeded(cls):
    env = cls(4096)
    a, b, c = env.reset(seed=3), env.reset(seed=3), env.reset(seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    state = env.get_state()
    high = torch.tensor([0.05] * 4 if cls is CartPole else [np.pi, 1.0])
    assert (state.abs() <= high).all()
    assert (state.amax(0) > 0.98 * high).all() and (state.amin(0) < -0.98 * high).all()
    assert state.mean(0).abs().max() < 0.05 * high.max()


def test_sim_state_round_trip_continues_exactly_including_resets():
    env = Pendulum(3, max_episode_steps=7)
    env.reset(seed=0)
    action = torch.full((3, 1), 0.3)
    step_n(env, 5, action)
    saved = env.sim_state()
    first = step_n(env, 12, action)  # crosses two time limits: uses the generator
    env.load_sim_state(saved)
    again = step_n(env, 12, action)
    for x, y in zip(first, again, strict=True):
        assert torch.equal(x.obs, y.obs) and torch.equal(x.final_obs, y.final_obs)
        assert torch.equal(x.reward, y.reward) and torch.equal(x.truncated, y.truncated)
    assert not Pendulum(2).load_sim_state(saved)  # another batch size: refused, nothing changed


def test_resume_state_of_make_env_saves_and_restores_the_native_sim():
    cfg = EnvConfig(id="CartPole-v1", backend="torch", num_envs=2, normalize_obs=True)
    env = make_env(cfg)
    assert isinstance(env, NormalizeObs) and isinstance(env.env, CartPole)
    env.reset(seed=0)
    step_n(env.env, 3, torch.tensor([0, 1]))
    state = resume_state(env)
    assert set(state["native"]) == {"state", "elapsed", "episode_return", "generator"}
    other = make_env(cfg)
    other.reset(seed=9)
    assert load_resume_state(other, state)
    assert torch.equal(other.env.get_state(), env.env.get_state())
    assert torch.equal(other.step(torch.tensor([1, 1])).obs, env.step(torch.tensor([1, 1])).obs)


def test_backend_torch_for_another_env_is_one_line_naming_the_available_ones():
    with pytest.raises(UserError, match=r"no native 'Acrobot-v1': available are CartPole-v1, "
                                        r"Pendulum-v1"):
        make_env(EnvConfig(id="Acrobot-v1", backend="torch"))
    with pytest.raises(UserError, match=r"env.kwargs.gravity: the native Pendulum-v1 takes dtype, g"):
        make_env(EnvConfig(id="Pendulum-v1", backend="torch", kwargs={"gravity": 3}))


def tiny_native(tiny_cfg, **changes):
    """PPO on native CartPole: 32 env steps per iteration, 160 in all, evaluations at 80/160."""
    logger = {"csv": True, "log_freq": 0}
    return tiny_cfg(total_timesteps=160, eval={"freq": 80}, logger=logger,
                    env={"backend": "torch", "max_episode_steps": 20}, **changes)


def test_ppo_on_native_cartpole_stops_and_resumes_exactly(tmp_path, tiny_cfg, monkeypatch):
    from tests.runner.test_resume import assert_same_run, train_with_a_stop

    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)
    cfg = tiny_native(tiny_cfg)
    straight = Runner(cfg, tmp_path / "straight")
    assert isinstance(straight.env, CartPole)
    result = straight.run()
    assert result["episodes"] == 2 and 1 <= result["mean_length"] <= 20
    train_with_a_stop(cfg, tmp_path / "stopped", 96)  # mid-episode: the sim state must come back
    assert_same_run(tmp_path / "straight", tmp_path / "stopped")
    evaluated = evaluate(tmp_path / "straight", episodes=3, write=False)  # `rltrain eval`'s path
    assert evaluated["episodes"] == 3 and all(1 <= n <= 20 for n in evaluated["lengths"])
    assert evaluated["returns"] == [float(n) for n in evaluated["lengths"]]  # 1 per step


def test_sac_on_native_pendulum_trains_through_the_off_policy_loop(tmp_path, monkeypatch):
    from rltrain.algos.configs.sac import SACConfig
    from rltrain.config.schema import CheckpointConfig, EvalConfig, LoggerConfig, TrainConfig
    from rltrain.config.validation import validate

    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)
    cfg = validate(TrainConfig(
        algo=SACConfig(hidden_sizes=[16, 16], buffer_size=500, learning_starts=40, batch_size=16),
        env=EnvConfig(id="Pendulum-v1", backend="torch", num_envs=4, max_episode_steps=25),
        logger=LoggerConfig(tensorboard=False, csv=False), eval=EvalConfig(freq=0, episodes=2,
                                                                           num_envs=2),
        checkpoint=CheckpointConfig(freq=0), total_timesteps=200, progress="off"))
    runner = Runner(cfg, tmp_path)
    result = runner.run()
    assert runner.state.global_step == 200 and runner.replay.size == 200
    assert list(runner.episodes.lengths) == [25] * 8  # 4 rows x 2 time limits, never terminated
    assert result["episodes"] == 2 and result["mean_length"] == 25
    assert -16.3 * 25 <= result["mean_reward"] <= 0
