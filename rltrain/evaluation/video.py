"""Episode videos: a wrapper that streams an env's rendered frames to one MP4 per episode.

Encoding and decoding use PyAV (`pip install "rltrain[video]"`, imported lazily): one ~35 MB
wheel that bundles FFmpeg with libx264, and that also decodes, which the tests need to count
frames. Frames are encoded as they are rendered, so memory stays flat however long an episode is.

An episode of length T gives T + 1 frames: the frame after `reset` and one after every step, the
last one showing the terminal state (the wrapper sits inside the vector env, so it renders before
the vector env's autoreset replaces that state).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rltrain.envs.atari import preprocessing
from rltrain.envs.atari_vec import wrap_atari_vec
from rltrain.envs.check import check_env_id
from rltrain.envs.config import EnvConfig
from rltrain.envs.make import make_one_env
from rltrain.envs.normalize import NormalizeObs
from rltrain.envs.vec_env import GymVecEnv, VecEnv
from rltrain.errors import UserError
from rltrain.text import first_line

VIDEO_EXTRA = 'pip install "rltrain[video]"'


def require_av() -> Any:
    """The `av` module, or a one-line `UserError` naming the extra to install."""
    try:
        # optional extra: PyAV, for videos only (`pip install "rltrain[video]"`)
        import av
    except ImportError as exc:
        raise UserError(f"video=true needs PyAV (the `av` package): {VIDEO_EXTRA}") from exc
    return av


class Mp4Writer:
    """Streams RGB frames `[H, W, 3]` (uint8) to an H.264 MP4; odd sizes are padded to even
    (yuv420p needs even width and height), repeating the last row/column."""

    def __init__(self, path: str | os.PathLike, fps: int):
        self.path, self.fps, self.frames = Path(path), int(fps), 0
        self._av = require_av()
        self._container = self._av.open(str(self.path), mode="w")
        self._stream: Any = None

    def write(self, frame: np.ndarray) -> None:
        """Encode one frame."""
        frame = np.asarray(frame, dtype=np.uint8)
        if frame.shape[0] % 2 or frame.shape[1] % 2:
            frame = np.pad(frame, ((0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0)),
                           mode="edge")
        if self._stream is None:
            self._stream = self._container.add_stream("libx264", rate=self.fps)
            self._stream.height, self._stream.width = frame.shape[:2]
            self._stream.pix_fmt = "yuv420p"
        video_frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        self._container.mux(self._stream.encode(video_frame))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and finish the file."""
        if self._stream is not None:
            self._container.mux(self._stream.encode(None))
        self._container.close()


def count_frames(path: str | os.PathLike) -> int:
    """Number of frames in a video file, by decoding it."""
    av = require_av()
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def read_frame(path: str | os.PathLike, index: int = 0) -> np.ndarray:
    """Frame `index` of a video file as an RGB array `[H, W, 3]` (uint8)."""
    av = require_av()
    with av.open(str(path)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i == index:
                return frame.to_ndarray(format="rgb24")
    raise IndexError(f"{path} has no frame {index}")


@dataclass
class EpisodeVideo:
    """One recorded episode: its file, raw return, length (steps) and number of frames."""

    path: Path
    episode_return: float
    length: int
    frames: int


class EpisodeRecorder(gym.Wrapper):
    """Records this env's next `episodes` episodes to `folder`, one MP4 each, and appends an
    `EpisodeVideo` to the `sink` the rows share as each one ends, until it holds `keep` (None:
    no limit). Renders only while recording: a full `sink` drops the episode in progress."""

    def __init__(self, env: gym.Env, folder: Path, episodes: int, sink: list[EpisodeVideo],
                 tag: str = "0", name: str | None = None, keep: int | None = None):
        super().__init__(env)
        self.folder, self.remaining, self.sink, self.tag = Path(folder), episodes, sink, tag
        self.keep = keep
        self.name = name or (env.spec.id if env.spec else "this env")  # for its error lines
        self.fps = int(env.metadata.get("render_fps") or 30)
        self._writer: Mp4Writer | None = None
        self._return, self._length = 0.0, 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._abort()  # a reset in mid-episode drops that episode's unfinished file
        if self.remaining > 0 and not self._full():
            self.folder.mkdir(parents=True, exist_ok=True)
            self._writer = Mp4Writer(self.folder / f".recording-{self.tag}.mp4", self.fps)
            self._return, self._length = 0.0, 0
            self._writer.write(self._render())
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._full():  # another row's episodes ended first and filled the sink
            self._abort()
        if self._writer is not None:
            self._return += float(reward)
            self._length += 1
            self._writer.write(self._render())
            if terminated or truncated:
                self._finish()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._abort()
        super().close()

    def _render(self) -> np.ndarray:
        try:
            frame = self.env.render()
        except Exception as exc:  # the env's own code: one line naming it and render()
            hint = _gl_hint() if "mujoco" in type(self.env.unwrapped).__module__ else ""
            raise UserError(f"env {self.name} raised {type(exc).__name__} in render() (video="
                            f"true): {first_line(exc)}{hint}; run eval without video=true") from exc
        if not isinstance(frame, np.ndarray) or frame.ndim != 3:
            raise UserError(f"env {self.name} returned no RGB frame from render(); run eval "
                            f"without video=true")
        return frame

    def _full(self) -> bool:
        return self.keep is not None and len(self.sink) >= self.keep

    def _finish(self) -> None:
        assert self._writer is not None
        self._writer.close()
        name = _video_name(len(self.sink), self._return, self._length)
        path = self._writer.path.rename(self.folder / name)
        self.sink.append(EpisodeVideo(path, self._return, self._length, self._writer.frames))
        self._writer, self.remaining = None, self.remaining - 1

    def _abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer.path.unlink(missing_ok=True)
            self._writer = None


def number_like_results(videos: list[EpisodeVideo], returns: list[float]) -> list[Path]:
    """Rename `episode-<k>_...` (k: the order the recorded episodes ended) to the index of the
    same episode in the evaluation's `returns` (results.json), so `episode-03` is `returns[3]`.
    Matched by return (the recorder and the evaluation add the same raw rewards; lengths may
    differ: frame skip); equal returns are interchangeable. Returns the new paths in order."""
    free = list(range(len(returns)))
    staged = []
    for v in videos:
        k = min(free, key=lambda i: abs(returns[i] - v.episode_return)) if free else len(returns)
        if free:
            free.remove(k)
        staged.append((k, v, v.path.rename(v.path.with_name(f".numbering-{k}.mp4"))))
    out = []
    for k, v, tmp in staged:
        out.append(tmp.rename(tmp.with_name(_video_name(k, v.episode_return, v.length))))
    return out


def _video_name(index: int, episode_return: float, length: int) -> str:
    return f"episode-{index:02d}_return-{episode_return:.1f}_length-{length}.mp4"


STAGING = ".recording-"
"""Prefix of the subfolder of `eval/videos/` an evaluation records into until it completes
(one per evaluation: two evaluations of one run never share one)."""
STALE_S = 24 * 3600.0
"""A staging folder this old is left by an evaluation that was killed: removed."""


@contextlib.contextmanager
def staged_videos(folder: Path) -> Iterator[Path]:
    """A staging folder of its own in `folder` for an evaluation's recordings. An evaluation that
    fails (an env error, Ctrl-C) takes its staging folder with it, so the videos of the last
    complete evaluation stay, with the results.json that names them; `publish_videos`
    replaces them once it completes."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(STAGING + "*"):  # left by evaluations that were killed long ago
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > STALE_S:
                shutil.rmtree(old, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=folder))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_videos(staged: list[Path], folder: Path, staging: Path) -> list[Path]:
    """Replace the earlier evaluation's videos in `folder` with `staged` (their new paths), and
    remove the `staging` folder they were recorded in."""
    for old in folder.glob("episode-*.mp4"):
        old.unlink()
    out = [p.rename(folder / p.name) for p in staged]
    shutil.rmtree(staging, ignore_errors=True)
    return out


def make_recording_env(cfg: EnvConfig, device: torch.device | str, budgets: list[int],
                       folder: Path, sink: list[EpisodeVideo], keep: int | None = None) -> VecEnv:
    """An evaluation `VecEnv` like `make_env(cfg, training=False)`, always synchronous (the
    recorders must live in this process), whose row i records its first `budgets[i]` episodes
    until `keep` have ended (None: all of them).

    To record the first `keep` episodes an evaluation counts, `budgets` are the episodes it
    counts per row (`episode_targets`): which rows end those first is not known in advance, so
    every row records until `keep` videos are in `sink`, in the order they ended (rows in order
    within a step, as `run_episodes` counts them)."""
    check_env_id(cfg.id)
    headless_gl()
    fns = [partial(_recorded, cfg, folder, k, sink, str(i), keep) if k
           else partial(make_one_env, cfg) for i, k in enumerate(budgets)]
    venv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    env: VecEnv = GymVecEnv(venv, device)
    if preprocessing(cfg):
        env = wrap_atari_vec(env, cfg, training=False)
    if cfg.normalize_obs:
        env = NormalizeObs(env, clip=cfg.clip_obs, training=False)
    return env


def headless_gl() -> None:
    """Where there is no display, MuJoCo renders through EGL (`MUJOCO_GL=egl`) unless the user
    chose a backend: gymnasium tries GLFW first, which fails without a display and leaves
    PyOpenGL bound to GLX, so its own fallback to EGL fails too. Other envs ignore it."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) \
            and "MUJOCO_GL" not in os.environ:
        os.environ["MUJOCO_GL"] = "egl"
        _CHOSEN.add("MUJOCO_GL")


_CHOSEN: set[str] = set()
"""Environment variables rltrain set itself (`headless_gl`), not the user."""


def _gl_hint() -> str:
    """What to try after a MuJoCo render failed, given how `MUJOCO_GL` came to be set."""
    gl = os.environ.get("MUJOCO_GL")
    if not gl:
        return ""
    if "MUJOCO_GL" in _CHOSEN:
        return " (no display: rltrain chose MUJOCO_GL=egl; is libEGL installed? or try MUJOCO_GL=osmesa)"
    return f" (MUJOCO_GL={gl}: without a display, unset it or use MUJOCO_GL=egl)"


def _recorded(cfg: EnvConfig, folder: Path, episodes: int, sink: list[EpisodeVideo],
              tag: str, keep: int | None) -> gym.Env:
    with warnings.catch_warnings():  # gymnasium warns about the mode; the error below is clearer
        warnings.filterwarnings("ignore", ".*is not in the possible render_modes", UserWarning)
        env = make_one_env(cfg, render_mode="rgb_array")
    if "rgb_array" not in env.metadata.get("render_modes", []):
        env.close()
        raise UserError(f"env {cfg.id} cannot render RGB frames (render_modes: "
                        f"{env.metadata.get('render_modes', [])}); run eval without video=true")
    return EpisodeRecorder(env, folder, episodes, sink, tag, cfg.id, keep)
