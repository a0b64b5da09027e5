"""Build a `VecEnv` from an `EnvConfig`."""

from __future__ import annotations

import difflib
import os
from functools import partial

import gymnasium as gym
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rltrain.config import EnvConfig
from rltrain.envs.normalize import NormalizeObs, ScaleReward
from rltrain.envs.vec_env import GymVecEnv, VecEnv
from rltrain.errors import UserError

# pygame's SDL prints a harmless XDG_RUNTIME_DIR warning per env on headless machines.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def check_env_id(env_id: str) -> None:
    """Raise a one-line `UserError` naming the closest ids when `env_id` is not registered."""
    if env_id not in gym.registry:
        near = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(near)}?" if near else "see `rltrain --help` for the list"
        raise UserError(f"unknown env {env_id!r}: {hint}")


def _make_one(cfg: EnvConfig, render_mode: str | None = None) -> gym.Env:
    kwargs = dict(cfg.kwargs)
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    return gym.make(cfg.id, render_mode=render_mode, **kwargs)


def make_env(
    cfg: EnvConfig,
    device: torch.device | str = "cpu",
    *,
    num_envs: int | None = None,
    gamma: float = 0.99,
    training: bool = True,
) -> VecEnv:
    """A gymnasium vector env adapted to `VecEnv`, with the normalization wrappers `cfg` asks for.

    Evaluation envs pass `training=False`: statistics stay frozen and rewards are not scaled.
    """
    check_env_id(cfg.id)
    n = num_envs or cfg.num_envs
    fns = [partial(_make_one, cfg) for _ in range(n)]
    vec_cls = AsyncVectorEnv if cfg.vectorization == "async" else SyncVectorEnv
    venv = vec_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    env: VecEnv = GymVecEnv(venv, device)
    if cfg.normalize_obs:
        env = NormalizeObs(env, clip=cfg.clip_obs, training=training)
    if cfg.normalize_reward and training:
        env = ScaleReward(env, gamma=gamma)
    return env


def env_state(env: VecEnv) -> dict:
    """Normalizer statistics of `env` as plain data (empty when it has none)."""
    get = getattr(env, "state_dict", None)
    return get() if get else {}


def load_env_state(env: VecEnv, state: dict) -> None:
    """Restore the observation statistics saved by `env_state` (reward stats only if present)."""
    if not state:
        return
    target = env
    while target is not None:
        if isinstance(target, NormalizeObs) and "obs_rms" in state:
            target.load_state_dict(state)
        if isinstance(target, ScaleReward) and "ret_rms" in state:
            target.rms.load_state_dict(state["ret_rms"])
        target = getattr(target, "env", None)


def resume_state(env: VecEnv) -> dict:
    """Everything needed to continue `env` exactly: normalizers, episode accumulators, sim state."""
    from rltrain.envs.snapshot import snapshot

    out = env_state(env)
    layer = env
    while layer is not None:
        if isinstance(layer, ScaleReward):
            out["running_return"] = layer._ret.cpu().clone()
        if isinstance(layer, GymVecEnv):
            out["episode_return"] = torch.from_numpy(layer._ep_return.copy())
            out["episode_length"] = torch.from_numpy(layer._ep_length.copy())
            out["sim"] = snapshot(layer.venv)
        layer = getattr(layer, "env", None)
    return out


def load_resume_state(env: VecEnv, state: dict) -> bool:
    """Restore `resume_state`; True when the simulator state itself was restored (exact resume)."""
    from rltrain.envs.snapshot import restore

    load_env_state(env, state)
    exact = False
    layer = env
    while layer is not None:
        if isinstance(layer, ScaleReward) and "running_return" in state:
            layer._ret.copy_(state["running_return"].to(layer._ret.device))
        if isinstance(layer, GymVecEnv) and "episode_return" in state:
            if len(state["episode_return"]) == layer.spec.num_envs:
                layer._ep_return[:] = state["episode_return"].numpy()
                layer._ep_length[:] = state["episode_length"].numpy()
                exact = restore(layer.venv, state.get("sim"))
        layer = getattr(layer, "env", None)
    return exact
