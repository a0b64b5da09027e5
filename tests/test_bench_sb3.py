"""The SB3 side of the speed benchmark and the raw-gymnasium baseline (benchmarks/)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import raw_env  # noqa: E402
import sb3_side  # noqa: E402

from rltrain.errors import UserError  # noqa: E402


def scripted_clock(returns: list[float], **kwargs) -> sb3_side.EvalClock:
    """An `EvalClock` whose evaluations return `returns` in order and take 20 ms each of a fake
    clock that only evaluations advance (training takes no time), so the asserts are exact."""
    it, now = iter(returns), [0.0]

    def evaluate() -> float:
        now[0] += 0.02
        return next(it)

    defaults = {"threshold": 0.0, "eval_every": 100, "max_steps": None, "budget": "full",
                "extra_evals": 2}
    return sb3_side.EvalClock(evaluate, **{**defaults, **kwargs}, now=lambda: now[0])


def test_clock_evaluates_once_per_crossed_multiple_and_excludes_eval_time():
    clock = scripted_clock([-3.0, -2.0, -1.0])
    clock.begin()
    for steps in (64, 128, 192, 256, 448):  # crosses 100 at 128, 200 at 256, 300 and 400 at 448
        clock.iteration_end(steps)
    assert [s for s, _, _ in clock.curve] == [128, 256, 448]
    assert [r for _, _, r in clock.curve] == [-3.0, -2.0, -1.0]
    assert clock.eval_seconds == pytest.approx(0.06)
    assert clock.train_seconds() == pytest.approx(0.0)  # the three evaluations are off the clock
    assert not clock.stop


def test_until_solved_plus_stops_extra_evals_after_first_hit():
    clock = scripted_clock([-5.0, 1.0, -1.0, 2.0, 9.0], budget="until_solved_plus")
    stops = []
    for steps in range(100, 600, 100):
        clock.iteration_end(steps)
        stops.append(clock.stop)
    assert stops == [False, False, False, True, True]  # hit at 200, then 300 and 400
    assert clock.stopped_at == 500  # the last call; run_sb3 stops at the first True
    full = scripted_clock([-5.0, 1.0, -1.0, 2.0])
    for steps in range(100, 500, 100):
        full.iteration_end(steps)
    assert not full.stop


def test_max_steps_caps_training():
    clock = scripted_clock([0.0], max_steps=150)
    clock.iteration_end(64)
    assert not clock.stop
    clock.iteration_end(160)
    assert clock.stop and clock.stopped_at == 160


def test_model_kwargs_follow_rl_zoo_conventions():
    kwargs = sb3_side.model_kwargs(sb3_side.RL_ZOO[("ppo", "CartPole-v1")], None)
    assert not set(sb3_side.ZOO_ONLY) & set(kwargs)
    assert kwargs["learning_rate"](1.0) == pytest.approx(1e-3)
    assert kwargs["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert kwargs["clip_range"](0.5) == pytest.approx(0.1)
    assert kwargs["n_steps"] == 32 and kwargs["batch_size"] == 256


def test_the_her_entry_names_sb3s_replay_class():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import HerReplayBuffer

    kwargs = sb3_side.model_kwargs(sb3_side.RL_ZOO[("sac", "FetchReach-v4")], 4)
    assert kwargs["replay_buffer_class"] is HerReplayBuffer
    assert kwargs["replay_buffer_kwargs"] == {"goal_selection_strategy": "future",
                                              "n_sampled_goal": 4}


def test_success_is_read_at_episode_ends_only_where_the_env_reports_it():
    seen: list[float] = []
    for local in ({"done": False, "info": {"is_success": 1.0}}, {"done": True, "info": {}},
                  {"done": True, "info": {"is_success": 0.0}},
                  {"done": True, "info": {"is_success": True}}):
        sb3_side.record_success(local, seen)
    assert seen == [0.0, 1.0]


def test_run_sb3_rejects_unknown_pairs():
    pytest.importorskip("stable_baselines3")
    with pytest.raises(UserError, match="no RL-Zoo entry"):
        sb3_side.run_sb3("a2c", "Pendulum-v1", 0, -200)


def test_run_sb3_short_ppo_cartpole_record():
    pytest.importorskip("stable_baselines3")
    r = sb3_side.run_sb3("ppo", "CartPole-v1", 0, 475.0, eval_every=256, eval_episodes=2,
                         max_steps=700)
    # 8 envs × 32 steps = 256 per iteration: evaluations after each update, stop at 768
    assert [s for s, _, _ in r["curve"]] == [256, 512, 768]
    assert r["total_steps"] == 768 and r["train_seconds"] > 0
    assert r["final_return"] == r["curve"][-1][2] and 8 <= r["final_return"] <= 500
    assert r["steps_to_threshold"] is None and r["solved"] is False


def test_run_sb3_td3_action_noise():
    pytest.importorskip("stable_baselines3")
    kwargs = sb3_side.model_kwargs(sb3_side.RL_ZOO[("td3", "Pendulum-v1")], 1)
    assert kwargs["action_noise"]._sigma.tolist() == [0.1]
    assert kwargs["policy_kwargs"] == {"net_arch": [400, 300]} and kwargs["train_freq"] == 1


def test_raw_env_rates_and_errors():
    rate = raw_env.raw_steps_per_second("CartPole-v1", 2, "sync", seconds=0.05)
    assert rate > 100
    rate = raw_env.raw_steps_per_second("CartPole-v1", 4, "vector_entry_point", seconds=0.05)
    assert rate > 100
    with pytest.raises(UserError, match="no vector_entry_point"):
        raw_env.make_vector_env("Pendulum-v1", 2, "vector_entry_point")
    with pytest.raises(UserError, match="only autoreset NEXT_STEP"):
        raw_env.make_vector_env("CartPole-v1", 2, "vector_entry_point", "same_step")
