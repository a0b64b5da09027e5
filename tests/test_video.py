"""Eval videos: one MP4 per recorded episode, T + 1 frames for T steps (reset frame included),
only the recorded rows render, and a missing PyAV is one line naming the extra."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltrain import cli
from rltrain.algos.ppo import PPO
from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import EnvConfig, config_to_dict
from rltrain.envs.make import make_env
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.evaluation.episodes import episode_targets, run_episodes
from rltrain.evaluation.video import (
    Mp4Writer,
    count_frames,
    make_recording_env,
    number_like_results,
    read_frame,
)

LAMP_ID = "rltrain_test/Lamp-v0"


class Lamp(gym.Env):
    """Renders its step counter k as the grey level 40·k; action 1 ends the episode."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    renders = 0
    """Calls of `render` over all instances."""

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode, self.k = render_mode, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.k = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.k += 1
        return np.array([float(self.k)], np.float32), 1.0, bool(int(action) == 1), False, {}

    def render(self) -> np.ndarray:
        Lamp.renders += 1
        return np.full((32, 48, 3), 40 * self.k, np.uint8)


class EndAtThree:
    """Continue at k < 2, end from k = 2: every episode is 3 steps long."""

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return (obs[:, 0] >= 2).long()


@pytest.fixture(scope="module", autouse=True)
def _lamp() -> None:
    if LAMP_ID not in gym.registry:
        gym.register(id=LAMP_ID, entry_point=Lamp)


@pytest.fixture
def av() -> None:
    """Skip where the `video` extra (PyAV) is not installed."""
    pytest.importorskip("av")


def test_frames_are_the_reset_state_then_every_step_including_the_terminal_one(tmp_path, av):
    sink: list = []
    env = make_recording_env(EnvConfig(id=LAMP_ID, max_episode_steps=10), "cpu",
                             episode_targets(2, 2), tmp_path, sink)
    result = run_episodes(EndAtThree(), env, episodes=4, seed=0)
    env.close()
    assert result["lengths"] == [3, 3, 3, 3]
    assert [v.path.name for v in sink] == ["episode-00_return-3.0_length-3.mp4",
                                           "episode-01_return-3.0_length-3.mp4"]
    for video in sink:
        assert count_frames(video.path) == video.frames == 4  # 3 steps + the reset frame
        levels = [read_frame(video.path, i).mean() for i in range(4)]
        # k = 0 after reset ... k = 3 at termination: the vector env's autoreset (which would
        # show k = 0 again) happens after the wrapper has rendered the terminal state.
        np.testing.assert_allclose(levels, [0, 40, 80, 120], atol=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [v.path.name for v in sink]


def test_only_the_recorded_episodes_are_rendered(tmp_path, av):
    Lamp.renders = 0
    sink: list = []
    budgets = episode_targets(1, 2)  # [0, 1]: row 0 never records
    env = make_recording_env(EnvConfig(id=LAMP_ID, max_episode_steps=10), "cpu", budgets,
                             tmp_path, sink)
    run_episodes(EndAtThree(), env, episodes=6, seed=0)  # 6 episodes, 18 steps
    env.close()
    assert budgets == [0, 1] and len(sink) == 1
    assert Lamp.renders == 4  # one episode: reset frame + 3 steps


class EndAt:
    """Row i's episodes last `lengths[i]` steps."""

    def __init__(self, lengths: list[int]):
        self.last = torch.tensor(lengths, dtype=torch.float32) - 1

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return (obs[:, 0] >= self.last).long()


def test_the_first_episodes_to_end_are_recorded_whichever_rows_end_them(tmp_path, av):
    """Rows of 5, 2 and 3 steps end episodes at steps 2 (row 1), 3 (row 2), 4 (row 1), 5 (row
    0) ...: the first three are rows 1, 2, 1. Recording each row's first episode gave rows 0,
    1, 2: results.json's episodes 0, 1 and 3 (issue: "records episodes 0, 1 and 4")."""
    Lamp.renders, sink = 0, []
    env = make_recording_env(EnvConfig(id=LAMP_ID, max_episode_steps=10), "cpu",
                             episode_targets(6, 3), tmp_path, sink, keep=3)
    result = run_episodes(EndAt([5, 2, 3]), env, episodes=6, seed=0)
    env.close()
    assert result["lengths"] == [2, 3, 2, 5, 3, 5]
    assert [(v.length, v.frames) for v in sink] == [(2, 3), (3, 4), (2, 3)]
    numbered = number_like_results(sink, result["returns"])
    assert [p.name.split("_")[0] for p in numbered] == ["episode-00", "episode-01", "episode-02"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in numbered)
    # the 10 recorded frames; then what was dropped once the third video ended (step 4): row
    # 0's episode so far (its reset and 4 steps) and row 2's second reset frame
    assert Lamp.renders == 10 + 5 + 1


def _ppo_checkpoint(run_dir: Path) -> Path:
    """An (untrained) PPO CartPole checkpoint with a 20-step time limit."""
    from rltrain.algos.configs.ppo import PPOConfig
    from rltrain.config.schema import TrainConfig
    from rltrain.config.validation import validate

    cfg = validate(TrainConfig(algo=PPOConfig(n_steps=16, batch_size=16, hidden_sizes=[16]),
                               env=EnvConfig(id="CartPole-v1", num_envs=2, max_episode_steps=20)))
    env = make_env(cfg.env, num_envs=1)
    algo = PPO(cfg.algo, env.spec)
    env.close()
    return checkpoint.save({"config": config_to_dict(cfg), "algo": algo.state_dict(), "env": {},
                            "counters": {"global_step": 0}}, run_dir / "checkpoints" / "latest.pt")


def test_eval_video_writes_one_mp4_per_recorded_episode_with_length_plus_one_frames(tmp_path, av):
    torch.manual_seed(1)  # these weights, with seed 0: row 0 ends the first episode (8 steps);
    ckpt = _ppo_checkpoint(tmp_path)  # recording rows 1 and 2 only named the videos 01 and 02
    videos = tmp_path / "eval" / "videos"
    videos.mkdir(parents=True)
    (videos / "episode-07_return-1.0_length-1.mp4").write_bytes(b"stale")
    result = evaluate(ckpt, episodes=6, num_envs=3, seed=0, video=True, video_episodes=2)
    assert [Path(p).parent for p in result["videos"]] == [videos] * 2
    assert sorted(p.name for p in videos.iterdir()) == sorted(Path(p).name for p in result["videos"])
    for path in result["videos"]:
        index, ret, length = re.fullmatch(r"episode-(\d\d)_return-([\d.]+)_length-(\d+)\.mp4",
                                          Path(path).name).groups()
        # the file's number is the episode's place in results.json
        assert (float(ret), int(length)) == (result["returns"][int(index)],
                                             result["lengths"][int(index)])
        assert count_frames(path) == int(length) + 1
    # the first two episodes results.json lists, not the first episode of rows 0 and 1
    assert [Path(p).name[:10] for p in result["videos"]] == ["episode-00", "episode-01"]
    frame = read_frame(result["videos"][0], 0)
    assert frame.shape == (400, 600, 3) and frame.std() > 10  # a real CartPole drawing


def test_an_evaluation_that_fails_keeps_the_last_videos_and_the_results_naming_them(
        tmp_path, av, monkeypatch):
    """The videos of the last complete evaluation were deleted before a new one ran; when it
    then failed (a headless render, Ctrl-C), results.json still named the deleted files."""
    import rltrain.evaluation.command as evaluation

    ckpt = _ppo_checkpoint(tmp_path)
    first = evaluate(ckpt, episodes=2, num_envs=2, seed=1, video=True, video_episodes=2)
    videos = tmp_path / "eval" / "videos"
    real = evaluation.run_episodes

    def fails_after_recording(*args, **kwargs):
        real(*args, **kwargs)  # the recordings are made, then the evaluation fails
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluation, "run_episodes", fails_after_recording)
    with pytest.raises(KeyboardInterrupt):
        evaluate(ckpt, episodes=3, num_envs=3, seed=2, video=True, video_episodes=3)
    assert sorted(p.name for p in videos.iterdir()) == sorted(Path(p).name for p in first["videos"])
    saved = json.loads((tmp_path / "eval" / "results.json").read_text())
    # each evaluation stages in a folder of its own: a second one never removes a live one's
    from rltrain.evaluation.video import staged_videos

    with staged_videos(videos) as one:
        (one / "x.mp4").write_bytes(b"live")
        with staged_videos(videos) as two:  # it cleared the one shared staging folder
            assert two != one and (one / "x.mp4").read_bytes() == b"live"
    assert saved["videos"] == first["videos"] and all(Path(p).is_file() for p in saved["videos"])


def test_odd_frame_sizes_are_padded_to_even(tmp_path, av):
    writer = Mp4Writer(tmp_path / "odd.mp4", fps=5)
    for level in (0, 100, 200):
        writer.write(np.full((5, 7, 3), level, np.uint8))
    writer.close()
    assert count_frames(tmp_path / "odd.mp4") == 3
    assert read_frame(tmp_path / "odd.mp4", 2).shape == (6, 8, 3)


def test_missing_pyav_is_one_line_naming_the_extra_before_evaluating(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` now fails
    monkeypatch.setattr(sys, "argv", ["rltrain", "eval", f"ckpt={tmp_path}/missing.pt", "video=true"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2  # the missing checkpoint is not even looked at
    assert capsys.readouterr().err.strip() == (
        'rltrain: error: video=true needs PyAV (the `av` package): pip install "rltrain[video]"')


def test_video_episodes_must_be_positive(tmp_path):
    with pytest.raises(UserError, match="video_episodes=0 must be > 0"):
        evaluate(tmp_path / "missing.pt", video=True, video_episodes=0)


def test_video_without_writing_is_refused_before_anything_runs(tmp_path):
    """write=False writes nothing into the run folder; its videos would have replaced the ones
    the folder's eval/results.json names (they did, until 2026-11-26)."""
    run = tmp_path / "run"
    with pytest.raises(UserError, match=r"video=True, write=False.*pass write=True, or video=False"):
        evaluate(run / "checkpoints" / "final.pt", video=True, write=False)
    assert not run.exists()


def test_an_env_that_cannot_render_is_a_user_error(tmp_path, counter_env_id):
    with pytest.raises(UserError, match="cannot render RGB frames"):
        make_recording_env(EnvConfig(id=counter_env_id), "cpu", [1], tmp_path, [])


class BrokenLamp(Lamp):
    """`render()` raises (`broken="raise"`) or returns no frame (`broken="none"`)."""

    def __init__(self, render_mode: str | None = None, broken: str = "raise") -> None:
        super().__init__(render_mode)
        self.broken = broken

    def render(self):
        if self.broken == "raise":
            raise RuntimeError("the lamp blew")
        return None


@pytest.mark.parametrize(("broken", "message"), [
    ("raise", r"env tests.test_video:BrokenLamp raised RuntimeError in render\(\) \(video=true\): "
              r"the lamp blew; run eval without video=true"),
    ("none", r"env tests.test_video:BrokenLamp returned no RGB frame from render\(\)"),
])
def test_a_render_that_fails_is_one_line_naming_the_env_and_render(broken, message, tmp_path, av):
    cfg = EnvConfig(id="tests.test_video:BrokenLamp", kwargs={"broken": broken})
    env = make_recording_env(cfg, "cpu", [1], tmp_path, [])
    with pytest.raises(UserError, match=message):
        env.reset(seed=0)
    env.close()


HEADLESS_MUJOCO_EVAL = """
import sys
from pathlib import Path
from rltrain.checkpoint import format as checkpoint
from rltrain.algos.ppo import PPO
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.config.schema import EnvConfig, TrainConfig, config_to_dict
from rltrain.config.validation import validate
from rltrain.envs.make import make_env
from rltrain.evaluation.command import evaluate
cfg = validate(TrainConfig(algo=PPOConfig(n_steps=16, batch_size=16, hidden_sizes=[16]),
                           env=EnvConfig(id="Hopper-v5", num_envs=1, max_episode_steps=4)))
env = make_env(cfg.env, num_envs=1)
algo = PPO(cfg.algo, env.spec)
env.close()
path = checkpoint.save({"config": config_to_dict(cfg), "algo": algo.state_dict(), "env": {},
                        "counters": {"global_step": 0}}, Path(sys.argv[1]) / "checkpoints" / "latest.pt")
result = evaluate(path, episodes=1, num_envs=1, video=True, video_episodes=1)
print("VIDEOS", result["videos"])
"""


def test_a_mujoco_eval_video_renders_without_a_display(tmp_path, av):
    """With no DISPLAY and no MUJOCO_GL, gymnasium tried GLFW first, which bound PyOpenGL to
    GLX, and rendering failed ("an OpenGL platform library has not been loaded"); rltrain now
    picks EGL there. A fresh interpreter: OpenGL's platform is chosen once per process."""
    pytest.importorskip("mujoco")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM")}
    proc = subprocess.run([sys.executable, "-c", HEADLESS_MUJOCO_EVAL, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "GLFWError" not in proc.stderr
    (video,) = (tmp_path / "eval" / "videos").glob("episode-00_*.mp4")
    assert count_frames(video) == 5 and read_frame(video, 0).std() > 5  # a real drawing


def test_mujoco_that_fails_to_import_is_one_line_naming_mujoco_gl(monkeypatch):
    """MUJOCO_GL=osmesa without libOSMesa makes `import mujoco` itself raise an AttributeError
    (deep in PyOpenGL): a traceback before; one line naming the import and MUJOCO_GL now."""
    import importlib

    from rltrain.envs import families

    def broken(name):
        raise AttributeError("'NoneType' object has no attribute 'glGetError'")

    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(UserError, match=r"^Hopper-v5: importing mujoco failed: AttributeError: "
                                        r"'NoneType' .* \(MUJOCO_GL=osmesa: is its OpenGL "
                                        r"library installed\?"):
        families.require_extra("Hopper-v5")
