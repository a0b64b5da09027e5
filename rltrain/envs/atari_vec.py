"""The vector-level half of the Atari preprocessing (`envs/atari.py` has the per-env half):
`FrameStack` for training and evaluation; `LifeLoss` and `SignReward` for training only.

They wrap `GymVecEnv` as `NormalizeObs` / `ScaleReward` do, in this order (innermost first):
GymVecEnv -> FrameStack -> LifeLoss -> SignReward. `GymVecEnv` counts the episode statistics
on the raw game (all lives, unclipped score) before any of them; a life loss only ends a
*training* episode, so the frame stack runs on through it and `final_obs` equals `obs`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from rltrain.envs.atari import describe
from rltrain.envs.config import EnvConfig
from rltrain.errors import UserError
from rltrain.types import StepResult


class FrameStack:
    """Observations `[N, k*C, H, W]`: the last k frames of each row, channels first, newest
    last, in the dtype the inner env gives (uint8 pixels stay uint8). Frames are `[H, W]`
    (C = 1: obs `[N, k, H, W]`, `spec.frame_stack = k`) or `[H, W, C]`.

    After a row's reset its stack is zeros except the newest frame; the `final_obs` of a row
    that ended is the stack of the episode that ended (its last k frames, the final one newest).
    """

    def __init__(self, env, k: int):
        self.env, self.k, self.device = env, int(k), env.device
        shape = tuple(env.spec.obs_shape)
        self.channels = 1 if len(shape) == 2 else shape[2]
        h, w = shape[:2]
        self.spec = dataclasses.replace(env.spec, obs_shape=(self.k * self.channels, h, w),
                                        frame_stack=self.k if self.channels == 1 else 0,
                                        pixels=True)
        self._stack: torch.Tensor | None = None

    def _chw(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.unsqueeze(1) if obs.dim() == 3 else obs.permute(0, 3, 1, 2)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        frame = self._chw(self.env.reset(seed))
        stack = frame.new_zeros((frame.shape[0], self.k * self.channels, *frame.shape[2:]))
        stack[:, -self.channels:] = frame
        self._stack = stack
        return stack.clone()

    def step(self, action: torch.Tensor) -> StepResult:
        assert self._stack is not None, "reset() before step()"
        res = self.env.step(action)
        c = self.channels
        final = torch.cat([self._stack[:, c:], self._chw(res.final_obs)], dim=1)
        obs = final.clone()
        done = res.terminated | res.truncated
        if bool(done.any()):
            obs[done] = 0
            obs[done, -c:] = self._chw(res.obs)[done]
        self._stack = obs
        res.obs, res.final_obs = obs.clone(), final
        return res

    def close(self) -> None:
        self.env.close()


def _base_with_info(env):
    """The innermost layer that forwards per-env info arrays (`GymVecEnv.info_keys`), or None."""
    layer, found = env, None
    while layer is not None:
        if hasattr(layer, "info_keys"):
            found = layer
        layer = getattr(layer, "env", None)
    return found


class LifeLoss:
    """Training only: a row whose `lives` dropped is `terminated`, though its game goes on (the
    next `obs` continues it, and its `final_obs` is that same `obs`). Rows that really ended
    are left alone: their `lives` (the reset info) become the new reference."""

    def __init__(self, env):
        self.env, self.spec, self.device = env, env.spec, env.device
        self._base = _base_with_info(env)
        if self._base is not None and "lives" not in self._base.info_keys:
            self._base.info_keys = (*self._base.info_keys, "lives")
        self._lives: np.ndarray | None = None

    def reset(self, seed: int | None = None) -> torch.Tensor:
        obs = self.env.reset(seed)
        lives = getattr(self._base, "reset_info", {}).get("lives")
        self._lives = None if lives is None else lives.copy()
        return obs

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        lives = res.info.get("env_info", {}).get("lives")
        if lives is None:
            return res
        if self._lives is not None:
            ended = (res.terminated | res.truncated).cpu().numpy()
            lost = (lives < self._lives) & ~ended  # NaN (no report) compares False
            if lost.any():
                res.terminated = res.terminated | torch.as_tensor(lost, device=res.terminated.device)
        self._lives = lives.copy()
        return res

    def close(self) -> None:
        self.env.close()


class SignReward:
    """Training only: each reward becomes its sign (-1, 0 or 1)."""

    def __init__(self, env):
        self.env, self.spec, self.device = env, env.spec, env.device

    def reset(self, seed: int | None = None) -> torch.Tensor:
        return self.env.reset(seed)

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        res.reward = torch.sign(res.reward)
        return res

    def close(self) -> None:
        self.env.close()


ATARI_VEC_WRAPPERS = (FrameStack, LifeLoss, SignReward)
"""The VecEnv wrappers of this module (`envs/make.py` walks through them to the base env)."""


def wrap_atari_vec(env, cfg: EnvConfig, training: bool):
    """`env` (a `GymVecEnv` of `AtariFrames` envs) with the vector-level wrappers `cfg.atari`
    asks for (`preprocessing_line` says which parts are on)."""
    a = cfg.atari
    shape = list(env.spec.obs_shape)
    if len(shape) not in (2, 3):  # env.wrappers reshaped the frames (FlattenObservation ...)
        raise UserError(f"{cfg.id}: the Atari preprocessing stacks image frames ([H, W] or "
                        f"[H, W, C]) but env.wrappers made the observation {shape}: drop that "
                        f"wrapper, or set env.atari.preprocess=false")
    # frame_stack 0 or 1: the frame alone, still channels first ([1, 84, 84]), so that it gets
    # the CNN and the replay stores it once (a bare [84, 84] frame got a linear layer)
    env = FrameStack(env, max(1, a.frame_stack))
    if training and a.terminal_on_life_loss:
        env = LifeLoss(env)
    if training and a.clip_reward:
        env = SignReward(env)
    return env


def preprocessing_line(env, cfg: EnvConfig) -> str:
    """The console line naming the parts of a training env's preprocessing that are on (the
    Runner says it with its start lines, after the checks: a refused run prints nothing)."""
    return describe(cfg, training=True, fire=_has_fire(env))


def _has_fire(env) -> bool | None:
    """Whether the game presses FIRE on reset (`AtariFrames.fire_action`, `AleRows.fire_action`:
    only games whose actions include it); None when the envs cannot be asked."""
    base = _base_with_info(env)
    try:
        if hasattr(base.venv, "fire_action"):  # ale-py's engine: one answer for all rows
            return base.venv.fire_action is not None
        return any(a is not None for a in base.venv.get_attr("fire_action"))
    except Exception:  # noqa: BLE001 - not AtariFrames envs (a test double): unknown
        return None
