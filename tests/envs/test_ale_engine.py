"""ale-py's C++ Atari engine (`env.backend=ale`, rltrain/envs/engines/ale.py) against the
gymnasium path (`AtariFrames` in a `SyncVectorEnv`) on recorded trajectories: the same frames,
rewards, life losses with FIRE after them, episode statistics and final observations."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("ale_py.vector_env")
pytest.importorskip("cv2")

from rltrain.config.schema import AtariConfig, EnvConfig  # noqa: E402
from rltrain.envs.atari_vec import preprocessing_line  # noqa: E402
from rltrain.envs.check import check_env  # noqa: E402
from rltrain.envs.make import capture_problem, make_env  # noqa: E402
from rltrain.errors import UserError  # noqa: E402


def breakout(backend: str, n: int, **kwargs) -> EnvConfig:
    """Breakout without randomness (no sticky actions, no no-ops): both engines play the same
    game from the same actions."""
    return EnvConfig(id="ALE/Breakout-v5", num_envs=n, backend=backend,
                     kwargs={"repeat_action_probability": 0.0},
                     atari=AtariConfig(noop_max=0), **kwargs)


def record(cfg: EnvConfig, actions: np.ndarray, training: bool = True):
    """The reset observation and each step's result of `cfg` under `actions` `[T, N]`."""
    env = make_env(cfg, training=training)
    out = [env.reset(3)]
    out += [env.step(torch.as_tensor(a)) for a in actions]
    env.close()
    return out


# NOOP, RIGHT, LEFT only: the policy never serves, so after a lost life only the engine's FIRE
# serves the next ball (without it the frames of the two engines part at the first lost life)
ACTIONS = np.random.default_rng(0).choice([0, 2, 3], size=(700, 2))


def test_the_ale_engine_plays_the_gymnasium_paths_game():
    gym_steps = record(breakout("gymnasium", 2), ACTIONS)
    ale_steps = record(breakout("ale", 2), ACTIONS)
    torch.testing.assert_close(ale_steps[0], gym_steps[0], rtol=0, atol=0)
    lives_lost = games = stale = 0
    for t in range(1, len(ACTIONS) + 1):
        g, a = gym_steps[t], ale_steps[t]
        for field in ("obs", "reward", "terminated", "truncated"):  # exact: uint8 frames
            torch.testing.assert_close(getattr(a, field), getattr(g, field), rtol=0, atol=0,
                                       msg=f"step {t}: {field}")
        ended = g.info.get("episode")
        assert (a.info.get("episode") is None) == (ended is None), f"step {t}"
        lives_lost += int(g.terminated.sum()) - (0 if ended is None else len(ended["index"]))
        if ended is None:
            torch.testing.assert_close(a.final_obs, g.final_obs, rtol=0, atol=0)
            continue
        for key in ("index", "return", "length"):  # whole games: all lives, the raw score
            np.testing.assert_array_equal(a.info["episode"][key], ended[key])
        for row in ended["index"]:
            games += 1
            torch.testing.assert_close(a.final_obs[row, :3], g.final_obs[row, :3], rtol=0, atol=0)
            if not torch.equal(a.final_obs[row, 3], g.final_obs[row, 3]):
                # the documented difference: a game that ends inside a frame skip shows ALE's
                # previous frame, the gymnasium path the frame it ended on
                stale += 1
                assert torch.equal(a.final_obs[row, 3], ale_steps[t - 1].obs[row, 3])
    assert lives_lost >= 4 and games >= 2, (lives_lost, games)  # both cases were played
    assert stale < games


def test_a_time_limit_truncates_both_engines_at_the_same_step():
    actions = ACTIONS[:120, :1]
    gym_steps = record(breakout("gymnasium", 1, max_episode_steps=50), actions, training=False)
    ale_steps = record(breakout("ale", 1, max_episode_steps=50), actions, training=False)
    ends = [t for t in range(1, 121) if ale_steps[t].truncated.any()]
    assert ends == [t for t in range(1, 121) if gym_steps[t].truncated.any()] == [50, 100]
    for t in ends:
        assert ale_steps[t].info["episode"]["length"].tolist() == [50]
        torch.testing.assert_close(ale_steps[t].final_obs, gym_steps[t].final_obs, rtol=0, atol=0)
        torch.testing.assert_close(ale_steps[t].obs, gym_steps[t].obs, rtol=0, atol=0)


def test_seeds_give_each_row_its_game_and_repeat_it():
    """With sticky actions and no-op resets (the v5 defaults): a seed repeats a row's game, and
    rows seeded apart play apart."""
    cfg = EnvConfig(id="ALE/Breakout-v5", num_envs=2, backend="ale")

    def frames(seed: int) -> torch.Tensor:
        env = make_env(cfg)
        env.reset(seed)
        rng = np.random.default_rng(1)
        obs = [env.step(torch.as_tensor(rng.integers(0, 4, 2))).obs for _ in range(60)]
        env.close()
        return torch.stack(obs)

    first, again, other = frames(5), frames(5), frames(6)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert not torch.equal(first[:, 0], first[:, 1])


def test_the_run_says_its_preprocessing_and_resume_restarts_episodes():
    env = make_env(EnvConfig(id="ALE/Breakout-v5", num_envs=2, backend="ale"))
    assert "FIRE on reset and after a lost life" in preprocessing_line(
        env, EnvConfig(id="ALE/Breakout-v5"))
    assert env.spec.obs_shape == (4, 84, 84) and env.reset(0).dtype == torch.uint8
    assert "ale-py's vector env" in capture_problem(env)
    env.close()
    pacman = make_env(EnvConfig(id="ALE/MsPacman-v5", num_envs=1, backend="ale"))
    assert "FIRE" not in preprocessing_line(pacman, EnvConfig(id="ALE/MsPacman-v5"))
    pacman.close()


def test_rgb_frames_and_the_action_set_follow_the_settings():
    rows = make_env(EnvConfig(id="ALE/Pong-v5", num_envs=1, backend="ale",
                              kwargs={"full_action_space": True},
                              atari=AtariConfig(grayscale=False, screen_size=64, frame_stack=2)))
    assert rows.spec.obs_shape == (6, 64, 64) and rows.spec.action_dim == 18
    rows.close()


@pytest.mark.parametrize("changes, words", [
    ({"id": "CartPole-v1"}, "env.backend=ale cannot step CartPole-v1 (only ALE/<Game>-v5 ids); "
                            "use env.backend=gymnasium"),
    ({"atari": AtariConfig(preprocess="false")}, "cannot step the raw game"),
    ({"kwargs": {"mode": 1}}, "env.backend=ale cannot take env.kwargs.mode"),
    ({"kwargs": {"repeat_action_probability": 1.5}}, "repeat_action_probability=1.5 (a "
                                                     "probability, 0 to 1)"),
    ({"kwargs": {"max_num_frames_per_episode": 1e5}}, "max_num_frames_per_episode=100000.0 "
                                                      "(frames: an integer)"),
    ({"vectorization": "async"}, "cannot run env.vectorization=async"),
    ({"imports": ["os"]}, "env.backend=ale cannot take env.imports"),
])
def test_what_the_engine_cannot_do_is_refused_in_one_line(changes, words):
    cfg = EnvConfig(**{"id": "ALE/Breakout-v5", "backend": "ale", **changes})
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        check_env(cfg)


def test_auto_steps_atari_with_ale_from_the_measured_count_and_says_so(monkeypatch):
    from rltrain.envs.engines import choice
    from rltrain.envs.make import engine_note

    monkeypatch.setitem(choice.FASTER_FROM, "atari", 8)
    monkeypatch.setitem(choice.MEASURED, "atari", 1.3)
    cfg = EnvConfig(id="ALE/Pong-v5")
    assert choice.choose(cfg, 4) == choice.Engine("gymnasium")
    env = make_env(cfg, num_envs=8)
    note = engine_note(env)
    assert "ale-py's C++ engine" in note and "1.3x" in note and "from 8 envs" in note
    env.close()
    for other in (EnvConfig(id="ALE/Pong-v5", kwargs={"mode": 1}),  # a setting it cannot take
                  EnvConfig(id="ALE/Pong-v5", atari=AtariConfig(preprocess="false"))):
        assert choice.choose(other, 8) == choice.Engine("gymnasium")
    monkeypatch.setattr(choice.ale, "ale_vector_installed", lambda: False)  # ale-py < 0.12
    assert choice.choose(cfg, 8) == choice.Engine("gymnasium")


def test_a_short_ppo_run_on_the_engine_trains_evaluates_and_resumes(tmp_path, monkeypatch,
                                                                   capfd):
    from tests.e2e.harness import run_cli

    run = tmp_path / "run"
    common = ["algo=ppo", "env.id=ALE/Pong-v5", "env.backend=ale", "env.num_envs=2",
              "algo.n_steps=16", "algo.batch_size=32", "algo.n_epochs=1",
              "env.max_episode_steps=20", "eval.freq=0", "eval.episodes=2", "eval.num_envs=1",
              "checkpoint.freq=32", "progress=plain", "preset=null", f"hydra.run.dir={run}"]
    first = run_cli([*common, "total_timesteps=32"], tmp_path, monkeypatch, capfd)
    assert first.rc == 0, first.describe()
    more = run_cli([f"resume={run}", "total_timesteps=64"], tmp_path, monkeypatch, capfd)
    assert more.rc == 0, more.describe()
    assert "episodes restart" in more.out + more.err, more.describe()
    assert "ale-py's vector env keeps its games' state in C++" in more.out + more.err
    ev = run_cli(["eval", f"ckpt={run}/checkpoints/final.pt", "episodes=1"], tmp_path,
                 monkeypatch, capfd)
    assert ev.rc == 0, ev.describe()


@pytest.mark.parametrize("backend", ["gymnasium", "ale"])
def test_every_episode_starts_served_despite_sticky_actions(backend):
    """v5's sticky actions (0.25) drop a single FIRE frame one time in four (ALE's own reset
    FIRE): a policy that never presses FIRE then never serves, and its evaluation runs to the
    108k-frame limit at 0 points. FIRE for a frame skip after the no-ops serves every row."""
    env = make_env(EnvConfig(id="ALE/Breakout-v5", num_envs=8, backend=backend))
    env.reset(0)
    served = torch.zeros(8, dtype=torch.bool)
    for _ in range(300):  # NOOP: a served ball is missed, a life lost (a training end)
        served |= env.step(torch.zeros(8, dtype=torch.int64)).terminated
    env.close()
    assert served.all(), served


def test_the_frame_limit_truncates_where_gymnasiums_does_and_zero_is_no_limit():
    """ALE's `max_num_frames_per_episode` (v5: 108k) counted by rltrain: ALE's engine would stop
    inside the frame skip and pool a stale frame into the final observation, which a
    truncation bootstraps from. 100 frames: FIRE's 4 at reset, then 24 steps of 4. The one
    difference: gymnasium's ALE does not play the limit's own frame (its last two frames are
    the same), rltrain's count lets the engine play it."""
    actions = ACTIONS[:60, :1]
    limit = {"repeat_action_probability": 0.0, "max_num_frames_per_episode": 100}
    steps = {backend: record(EnvConfig(id="ALE/Breakout-v5", num_envs=1, backend=backend,
                                       kwargs=limit, atari=AtariConfig(noop_max=0)),
                             actions, training=False) for backend in ("gymnasium", "ale")}
    ends = [t for t in range(1, 61) if steps["ale"][t].truncated.any()]
    assert ends == [t for t in range(1, 61) if steps["gymnasium"][t].truncated.any()] == [24, 48]
    for t in ends:
        ale, gym_ = steps["ale"][t], steps["gymnasium"][t]
        torch.testing.assert_close(ale.obs, gym_.obs, rtol=0, atol=0)  # the next episode's
        torch.testing.assert_close(ale.final_obs[:, :3], gym_.final_obs[:, :3], rtol=0, atol=0)
        assert not torch.equal(ale.final_obs[0, 3], steps["ale"][t - 1].obs[0, 3])  # not stale
    unlimited = {**limit, "max_num_frames_per_episode": 0}
    free = record(EnvConfig(id="ALE/Breakout-v5", num_envs=1, backend="ale", kwargs=unlimited,
                            atari=AtariConfig(noop_max=0)), actions, training=False)
    assert not any(step.truncated.any() for step in free[1:])


def test_an_action_outside_the_space_is_an_error_not_a_hang():
    env = make_env(EnvConfig(id="ALE/Breakout-v5", num_envs=2, backend="ale"))
    env.reset(0)
    with pytest.raises(Exception, match="outside Discrete"):
        env.step(torch.tensor([0, 7]))
    env.close()


def test_closing_ends_the_engines_threads():
    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("counts threads through /proc")
    before = threads()
    env = make_env(EnvConfig(id="ALE/Breakout-v5", num_envs=8, backend="ale"))
    assert threads() >= before + 8
    env.close()
    assert threads() <= before + 1
