"""A goal env's `info["is_success"]`: taken from the step that ends each episode (gymnasium puts
it in `final_info`), reported as `success` beside the episode's return, and averaged into
`episode/success_rate` while training and `success_rate` / `eval/success_rate` by evaluations.
Envs that report none show no success rate anywhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rltrain.envs.config import EnvConfig
from rltrain.envs.extras import episode_success
from rltrain.envs.make import make_env, shared_rows
from rltrain.evaluation.episodes import eval_metrics, run_episodes
from rltrain.runner.episode_stats import EpisodeTracker
from rltrain.types import StepResult

EVERY_OTHER = "tests.envs.goal_envs:SucceedsEveryOther"


class FirstAction:
    """A policy stand-in: action 0 for every row."""

    recurrent = False

    def act(self, obs, deterministic=True, **_):
        return torch.zeros(obs.shape[0], dtype=torch.long)


def steps(env, n):
    env.reset(seed=0)
    return [env.step(torch.zeros(env.spec.num_envs, dtype=torch.long)) for _ in range(n)]


def test_each_ended_episode_reports_the_success_of_its_last_step():
    env = make_env(EnvConfig(id=EVERY_OTHER, num_envs=2))
    try:
        results = steps(env, 6)  # three episodes per row, each ending on an even step
    finally:
        env.close()
    assert ["episode" in r.info for r in results] == [False, True] * 3
    assert [r.info["episode"]["success"].tolist() for r in results[1::2]] == [
        [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    assert results[1].info["episode"]["index"].tolist() == [0, 1]


def test_an_env_without_is_success_reports_none():
    env = make_env(EnvConfig(id=EVERY_OTHER, num_envs=2, kwargs={"report": False}))
    try:
        results = steps(env, 2)
    finally:
        env.close()
    assert "success" not in results[1].info["episode"]


def test_episode_success_reads_final_info_and_marks_rows_without_one():
    info = {"is_success": np.array([False, False, False]), "_is_success": np.array([1, 1, 1], bool),
            "final_info": {"is_success": np.array([False, True, False]),
                           "_is_success": np.array([False, True, False])},
            "_final_info": np.array([True, True, False])}
    done = np.array([True, True, False])
    got = episode_success(info, done)  # row 0 ended without reporting; row 2 did not end
    assert np.isnan(got[0]) and got[1] == 1.0 and len(got) == 2
    assert episode_success({"final_info": {}, "_final_info": done}, done) is None
    assert episode_success({}, done) is None


def test_a_seed_batchs_rows_keep_their_own_successes():
    cfg = EnvConfig(id=EVERY_OTHER, num_envs=1)
    shared = shared_rows(cfg, [0, 1], torch.device("cpu"))
    assert shared is not None
    views = [make_env(cfg, base=shared.view(k)) for k in range(2)]
    for k, view in enumerate(views):
        view.reset(seed=k)
    ended = []
    for _ in range(4):
        action = torch.zeros(1, dtype=torch.long)
        shared.step({0: action, 1: action})
        for k, view in enumerate(views):
            res = view.step(action)
            if "episode" in res.info:
                ended.append((k, res.info["episode"]["success"].tolist()))
    shared.close()
    assert ended == [(0, [0.0]), (1, [0.0]), (0, [1.0]), (1, [1.0])]


@pytest.mark.parametrize("episodes, rate", [(2, 0.0), (4, 0.5), (6, 1 / 3)])
def test_an_evaluation_gives_the_share_of_successful_episodes(episodes, rate):
    """Each of the 2 rows runs episodes/2 episodes: failed, succeeded, failed, ..."""
    env = make_env(EnvConfig(id=EVERY_OTHER, num_envs=2))
    try:
        result = run_episodes(FirstAction(), env, episodes)
    finally:
        env.close()
    assert result["success_rate"] == pytest.approx(rate) and result["episodes"] == episodes
    assert eval_metrics(result)["eval/success_rate"] == pytest.approx(rate)


def test_one_env_counts_each_episode_once():
    env = make_env(EnvConfig(id=EVERY_OTHER, num_envs=1))
    try:
        result = run_episodes(FirstAction(), env, 3)  # False, True, False
    finally:
        env.close()
    assert result["success_rate"] == pytest.approx(1 / 3)


def test_an_evaluation_of_a_plain_env_has_no_success_rate():
    env = make_env(EnvConfig(id=EVERY_OTHER, num_envs=2, kwargs={"report": False}))
    try:
        result = run_episodes(FirstAction(), env, 4)
    finally:
        env.close()
    assert "success_rate" not in result and "eval/success_rate" not in eval_metrics(result)


def test_the_tracker_averages_successes_over_its_window():
    tracker = EpisodeTracker(window=3)
    z = torch.zeros(2)

    def ended(success):
        info = {"episode": {"index": np.arange(len(success)), "return": np.zeros(len(success)),
                            "length": np.ones(len(success), int), "terminated": len(success),
                            "truncated": 0, "success": np.array(success)}}
        tracker.record(StepResult(z, z, z.bool(), z.bool(), z, info))

    assert "episode/success_rate" not in tracker.metrics()
    ended([1.0, np.nan])  # a row that reported none is not counted
    assert tracker.metrics()["episode/success_rate"] == 1.0
    ended([0.0, 0.0, 1.0])  # the window keeps the last 3: 0, 0, 1
    assert tracker.metrics()["episode/success_rate"] == pytest.approx(1 / 3)


def test_fetchreach_trains_with_her_and_reports_its_success_rate(tmp_path):
    """gymnasium-robotics' FetchReach through the command line's path (the `robotics` extra,
    in a venv of its own: skipped where it is not installed, or beside a mujoco it cannot use)."""
    pytest.importorskip("gymnasium_robotics")
    from rltrain.api import train
    from rltrain.envs.families import check_robotics_mujoco
    from rltrain.errors import UserError

    try:
        check_robotics_mujoco("FetchReach-v4")
    except UserError as exc:
        pytest.skip(str(exc))
    result = train(["algo=sac", "env=fetchreach", "total_timesteps=1200", "algo.learning_starts=1000",
                    "eval.episodes=4", "logger=none", "progress=off"], run_dir=tmp_path)
    assert 0.0 <= result["success_rate"] <= 1.0 and result["episodes"] == 4
