"""The standard Atari preprocessing of `ALE/<Game>-v5` ids, each part switchable (`env.atari`).

Inside each env (a gymnasium wrapper, `AtariFrames`): the ALE env is made with `frameskip=1`,
then no-op reset, FIRE on reset, frame skip with max-pooling of the last two frames, grayscale
and resize. Above the vector env (`envs/atari_vec.py`): the frame stack (training and
evaluation), and, for training only, terminal on life loss and reward clipping, which sit above
`GymVecEnv` so that its episode statistics (and evaluation) report the real game score.

Why not `gymnasium.wrappers.AtariPreprocessing`: when a game ends inside a frame skip it returns
a max over stale frames of an earlier step as the final observation, it has no FIRE on reset,
and its life-loss signal would reach the episode statistics; the rest is the same recipe.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltrain.envs.config import EnvConfig, atari_preprocess
from rltrain.envs.families import family_of
from rltrain.errors import UserError

ATARI_HZ = 60
"""Frames per second of the Atari 2600: videos of preprocessed envs play at ATARI_HZ / frame_skip."""


def preprocessing(cfg: EnvConfig) -> bool:
    """Whether `cfg` asks for the Atari preprocessing (`env.atari.preprocess`, auto: ALE ids)."""
    return cfg.backend in ("gymnasium", "auto", "ale") and atari_preprocess(cfg, family_of(cfg.id))


def check_frame_layout(cfg: EnvConfig, encoder: str, algo_state: dict[str, Any],
                       source: str) -> None:
    """Refuse (one line) a checkpoint of `env.atari.frame_stack=0` written before 2026-11-26,
    when that setting gave bare `[84, 84]` frames to a network without the CNN: this version
    gives `[1, 84, 84]` frames to the Nature CNN (`encoder` auto or cnn), so the stored weights
    (no convolution among them) cannot be read, and the replay and loop hold other shapes."""
    if not (preprocessing(cfg) and cfg.atari.frame_stack == 0 and encoder in ("auto", "cnn")):
        return
    if _holds_key(algo_state, "convs"):
        return
    raise UserError(f"{source} was written before 2026-11-26, when env.atari.frame_stack=0 gave "
                    "bare [84, 84] frames to a network without the CNN; it now gives [1, 84, 84] "
                    "frames to the Nature CNN, so these weights cannot be read: train it again")


def _holds_key(state: Any, part: str) -> bool:
    """Whether a nested dict/list of state dicts has a key with `part` among its dotted parts."""
    if isinstance(state, dict):
        return any(part in str(k).split(".") or _holds_key(v, part) for k, v in state.items())
    if isinstance(state, list):
        return any(_holds_key(v, part) for v in state)
    return False


def check_atari_env(cfg: EnvConfig) -> None:
    """One-line `UserError`s for settings the preprocessing cannot honour (no env is built)."""
    on = atari_preprocess(cfg, family_of(cfg.id))
    if on and family_of(cfg.id) != "atari":
        raise UserError(f"env.atari.preprocess={cfg.atari.preprocess}: {cfg.id} is not an Atari "
                        f"(ALE/<Game>-v5) id; use env.atari.preprocess=auto or false")
    if not on:
        return
    if cfg.kwargs.get("continuous"):
        raise UserError(f"env.kwargs.continuous={cfg.kwargs['continuous']}: the Atari "
                        f"preprocessing (no-op reset, FIRE) steps {cfg.id} with its discrete "
                        f"actions; ALE's continuous mode runs only with env.atari.preprocess=false")
    skip = cfg.kwargs.get("frameskip", 1)
    if skip != 1:
        raise UserError(f"env.kwargs.frameskip={skip} would skip frames twice with the Atari "
                        f"preprocessing: set env.atari.frame_skip instead (or "
                        f"env.atari.preprocess=false)")
    if cfg.normalize_obs:
        raise UserError(f"env.normalize_obs=true would normalize each pixel of {cfg.id}'s "
                        f"preprocessed frames; the CNN encoder scales them (uint8 by 1/255) "
                        f"instead: set env.normalize_obs=false")


def ale_kwargs(cfg: EnvConfig) -> dict[str, Any]:
    """`env.kwargs` for `gymnasium.make` of a preprocessed ALE id: one frame per ALE step (the
    id's other defaults, sticky actions included, are kept unless `env.kwargs` sets them).
    `obs_type` only sets what the ALE env copies out each frame, which `AtariFrames` ignores
    (it reads the screen itself): grayscale is the cheaper copy."""
    return {"obs_type": "grayscale" if cfg.atari.grayscale else "rgb", **dict(cfg.kwargs),
            "frameskip": 1}


def describe(cfg: EnvConfig, training: bool = True, fire: bool | None = True) -> str:
    """The console line naming the parts of the preprocessing that are on (`fire`: whether
    the game has a FIRE action to press; False leaves FIRE out of the line)."""
    a, parts = cfg.atari, []
    if a.noop_max > 0:
        parts.append(f"{a.noop_max} no-op reset")
    if a.frame_skip > 1:
        parts.append(f"frame skip {a.frame_skip} (max-pooled)")
    parts.append(f"{a.screen_size}x{a.screen_size} {'grayscale' if a.grayscale else 'RGB'}")
    if a.fire_reset and fire is not False:
        parts.append("FIRE on reset and after a lost life")
    if training and a.terminal_on_life_loss:
        parts.append("life loss ends training episodes")
    if training and a.clip_reward:
        parts.append("rewards clipped to sign (training)")
    if a.frame_stack > 1:
        parts.append(f"{a.frame_stack}-frame stack")
    return "atari preprocessing: " + ", ".join(parts)


class AtariFrames(gym.Wrapper):
    """No-op reset, FIRE on reset and after a lost life, frame skip (max over the last two
    frames), grayscale and resize, around an ALE env made with `frameskip=1`.

    Observations are uint8 `[size, size]` (grayscale) or `[size, size, 3]` (RGB). A step's reward
    is the sum over its frames; its info is that of its last frame (`lives`, frame numbers).
    When the game ends inside a skip, the observation is the frame it ended on. The number of
    no-ops is drawn from the env's own RNG (`np_random`), which `reset(seed=...)` seeds.
    """

    def __init__(self, env: gym.Env, noop_max: int = 30, frame_skip: int = 4,
                 screen_size: int = 84, grayscale: bool = True, fire_reset: bool = True):
        super().__init__(env)
        base = env.unwrapped
        if getattr(base, "_frameskip", 1) != 1:
            raise UserError("the Atari preprocessing needs the ALE env made with frameskip=1")
        self.noop_max, self.frame_skip = int(noop_max), int(frame_skip)
        self.size, self.grayscale = int(screen_size), bool(grayscale)
        meanings = list(base.get_action_meanings())
        if meanings[0] != "NOOP":
            self.noop_max = 0
        self.fire_action = meanings.index("FIRE") if fire_reset and "FIRE" in meanings else None
        h, w = base.ale.getScreenDims()
        shape = (h, w) if self.grayscale else (h, w, 3)
        self._frames = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]
        out = (self.size, self.size) if self.grayscale else (self.size, self.size, 3)
        self.observation_space = gym.spaces.Box(0, 255, out, np.uint8)
        self.metadata = {**env.metadata, "render_fps": max(1, round(ATARI_HZ / self.frame_skip))}

    def _grab(self, buf: np.ndarray) -> None:
        ale = self.env.unwrapped.ale
        if self.grayscale:
            ale.getScreenGrayscale(buf)
        else:
            ale.getScreenRGB(buf)

    def _observe(self, pooled: bool) -> np.ndarray:
        # optional extra: OpenCV, for Atari ids only (`pip install "rltrain[atari]"`)
        import cv2

        frame = np.maximum(self._frames[0], self._frames[1]) if pooled else self._frames[0]
        return cv2.resize(frame, (self.size, self.size), interpolation=cv2.INTER_AREA)

    def _act(self, action: Any, frames: int) -> tuple[float, bool, bool, dict, bool]:
        """Repeat `action` for up to `frames` frames: (reward sum, terminated, truncated, info of
        the last frame, whether the last two frames were pooled); stops when the game ends."""
        total, terminated, truncated, info, pooled = 0.0, False, False, {}, False
        for t in range(frames):
            _, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if t == frames - 2:
                self._grab(self._frames[1])
                pooled = True
            if terminated or truncated or t == frames - 1:
                self._grab(self._frames[0])
                break
        return total, terminated, truncated, info, pooled

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset, take k NOOP frames (k uniform in [0, noop_max - 1]), then press FIRE for
        `frame_skip` frames where the game has it (the observation max-pools that step's last
        two frames): ALE's C++ engine's no-op count, and the FIRE step `env.backend=ale` takes
        after it (envs/engines/ale.py), so that both start the same games. A frame skip of
        FIRE, not one frame: with sticky actions (v5: 0.25) a single FIRE frame is lost one
        time in four, and a deterministic policy that never presses FIRE then never serves."""
        _, info = self.env.reset(seed=seed, options=options)
        info = dict(info)
        noops = int(self.unwrapped.np_random.integers(0, self.noop_max)) if self.noop_max else 0
        for _ in range(noops):
            _, _, terminated, truncated, step_info = self.env.step(0)
            info.update(step_info)
            if terminated or truncated:
                _, info = self.env.reset(options=options)
                info = dict(info)
        if self.fire_action is not None:
            _, terminated, truncated, step_info, pooled = self._act(self.fire_action, self.frame_skip)
            info.update(step_info)
            if not (terminated or truncated):
                return self._observe(pooled), info
            _, info = self.env.reset(options=options)
            info = dict(info)
        self._grab(self._frames[0])
        return self._observe(False), info

    def step(self, action: Any):
        """One agent step: `frame_skip` frames of `action`, rewards summed, last two frames pooled.

        After a lost life (the game goes on) FIRE is pressed for `frame_skip` more frames where
        the game has it, within this step: games such as Breakout wait for FIRE to serve again,
        and a deterministic policy that never presses it would stall until the time limit.
        """
        lives = self.env.unwrapped.ale.lives()
        reward, terminated, truncated, info, pooled = self._act(action, self.frame_skip)
        lost = self.env.unwrapped.ale.lives() < lives
        if self.fire_action is not None and lost and not (terminated or truncated):
            more, terminated, truncated, info, pooled = self._act(self.fire_action, self.frame_skip)
            reward += more
        return self._observe(pooled), reward, terminated, truncated, info


def wrap_frames(env: gym.Env, cfg: EnvConfig) -> gym.Env:
    """`env` (an ALE env made with `ale_kwargs`) inside `AtariFrames` as `cfg.atari` says."""
    a = cfg.atari
    return AtariFrames(env, a.noop_max, a.frame_skip, a.screen_size, a.grayscale, a.fire_reset)
