"""Build a `VecEnv` from an `EnvConfig`: gymnasium envs through `GymVecEnv`, native torch envs
(`env.backend=torch`) and your batched envs directly; save and restore their state for resume."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from rltrain.config import EnvConfig
from rltrain.envs.custom import (
    apply_wrappers,
    call_factory,
    check_call,
    check_wrappers,
    import_modules,
    is_vec_env,
    make_gym_env,
    resolve_env_id,
)
from rltrain.envs.native import check_native_kwargs, make_native
from rltrain.envs.normalize import NormalizeObs, ScaleReward
from rltrain.envs.vec_env import GymVecEnv, VecEnv
from rltrain.errors import UserError

# pygame's SDL prints a harmless XDG_RUNTIME_DIR warning per env on headless machines.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def check_env_id(env_id: str, imports: list[str] | tuple[str, ...] = ()) -> None:
    """Raise a one-line `UserError` (closest ids, or the import error) when `env_id` names no
    registered id, `module:EnvId` or `module:factory` (see `envs/custom.py`)."""
    resolve_env_id(env_id, imports)


def check_env(cfg: EnvConfig) -> None:
    """Everything about `cfg` that can be checked without building an env: the id (importing
    what it names), the backend, wrapper names and the keyword arguments of factories and
    wrappers. The CLI calls this before Hydra starts, so mistakes cost no run directory."""
    if cfg.backend == "torch":
        if cfg.wrappers:
            raise UserError("env.wrappers wrap gymnasium envs; env.backend=torch has none "
                            "(use env.backend=gymnasium)")
        if cfg.vectorization == "async":
            raise UserError("env.vectorization=async has no meaning with env.backend=torch "
                            "(the native env steps the whole batch in this process)")
        import_modules(cfg.imports)
        check_native_kwargs(cfg.id, dict(cfg.kwargs))
        return
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        if cfg.wrappers:
            raise UserError(f"env.wrappers wrap gymnasium envs; {cfg.id} builds a batched "
                            f"VecEnv (num_envs in its signature), which they cannot wrap")
        if cfg.vectorization == "async":
            raise UserError(f"env.vectorization=async has no meaning for {cfg.id}: it builds "
                            f"the whole batch itself")
        check_call(f"env factory {cfg.id}", source.factory, **_vec_kwargs(cfg, 1, "cpu"))
        return
    if source.factory is not None:
        check_call(f"env factory {cfg.id}", source.factory, **dict(cfg.kwargs))
    check_wrappers(cfg.wrappers)


def _make_one(cfg: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """One gymnasium env of `cfg`, time limit and `env.wrappers` applied."""
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        raise UserError(f"{cfg.id} is a batched VecEnv: this needs one gymnasium env per row "
                        f"(e.g. for video)")
    env = make_gym_env(source, dict(cfg.kwargs), cfg.max_episode_steps, render_mode)
    return apply_wrappers(env, cfg.wrappers)


def _vec_kwargs(cfg: EnvConfig, num_envs: int, device: torch.device | str) -> dict[str, Any]:
    """The keyword arguments of a batched factory: num_envs, device, time limit, env.kwargs."""
    extra = {} if cfg.max_episode_steps is None else {"max_episode_steps": cfg.max_episode_steps}
    return {"num_envs": num_envs, "device": torch.device(device), **extra, **dict(cfg.kwargs)}


def _make_vec(cfg: EnvConfig, device: torch.device | str, n: int) -> VecEnv:
    """The unnormalized `VecEnv`: native (backend=torch), the user's batched env, or gymnasium."""
    check_env(cfg)
    if cfg.backend == "torch":
        return make_native(cfg.id, n, device, cfg.max_episode_steps, **dict(cfg.kwargs))
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        env = call_factory(source, _vec_kwargs(cfg, n, device))
        if not is_vec_env(env):
            raise UserError(f"env factory {cfg.id} returned an object of type {type(env).__name__}, not a VecEnv "
                            f"(needs spec, reset and step; see rltrain/envs/vec_env.py)")
        if env.spec.num_envs != n:
            raise UserError(f"env factory {cfg.id} built {env.spec.num_envs} envs; asked for {n}")
        return env
    fns = [partial(_make_one, cfg) for _ in range(n)]
    vec_cls = AsyncVectorEnv if cfg.vectorization == "async" else SyncVectorEnv
    return GymVecEnv(vec_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP), device)


def make_env(
    cfg: EnvConfig,
    device: torch.device | str = "cpu",
    *,
    num_envs: int | None = None,
    gamma: float = 0.99,
    training: bool = True,
) -> VecEnv:
    """The `VecEnv` of `cfg` (see `_make_vec`), with the normalization wrappers `cfg` asks for.

    Evaluation envs pass `training=False`: statistics stay frozen and rewards are not scaled.
    Image observations (3-D) refuse `normalize_obs`: the CNN encoder scales pixels itself.
    """
    env = _make_vec(cfg, device, num_envs or cfg.num_envs)
    if cfg.normalize_obs and len(env.spec.obs_shape) == 3:
        env.close()
        raise UserError(f"env.normalize_obs=true would normalize each pixel of {cfg.id}'s image "
                        f"observations {list(env.spec.obs_shape)}; the CNN encoder scales them "
                        f"(uint8 by 1/255) instead: set env.normalize_obs=false")
    if cfg.normalize_obs:
        env = NormalizeObs(env, clip=cfg.clip_obs, training=training)
    if cfg.normalize_reward and training:
        env = ScaleReward(env, gamma=gamma)
    return env


def env_state(env: VecEnv) -> dict:
    """Normalizer statistics of `env` as plain data (empty when it has none)."""
    return env.state_dict() if isinstance(env, (NormalizeObs, ScaleReward)) else {}


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
    """Everything needed to continue `env` exactly: normalizers, episode accumulators, sim state
    (of a `GymVecEnv`'s sub-envs, or `sim_state()` of a native env that has one)."""
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
        if callable(getattr(layer, "sim_state", None)):
            out["native"] = layer.sim_state()
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
        if "native" in state and callable(getattr(layer, "load_sim_state", None)):
            exact = bool(layer.load_sim_state(state["native"]))
        layer = getattr(layer, "env", None)
    return exact
