"""Build a `VecEnv` from an `EnvConfig`: gymnasium envs through `GymVecEnv`, native torch envs
(`env.backend=torch`) and your batched envs directly, one engine for a seed batch
(`shared_rows`); save and restore their state for resume."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from rltrain.envs.atari import ale_kwargs, preprocessing, wrap_frames
from rltrain.envs.atari_vec import ATARI_VEC_WRAPPERS, wrap_atari_vec
from rltrain.envs.check import check_env, vec_kwargs
from rltrain.envs.config import ON_POLICY_NUM_ENVS, EnvConfig
from rltrain.envs.contract import ContractChecked
from rltrain.envs.custom import (
    apply_wrappers,
    call_factory,
    is_vec_env,
    make_gym_env,
    resolve_env_id,
)
from rltrain.envs.engines.ale import make_ale
from rltrain.envs.engines.choice import choose
from rltrain.envs.engines.envpool import make_envpool
from rltrain.envs.engines.sync import SyncSameStep
from rltrain.envs.frame_stack import VectorFrameStack
from rltrain.envs.native import make_native
from rltrain.envs.normalize import NormalizeObs, ScaleReward, normalized_entries
from rltrain.envs.rows import GymRowView, SharedRows, row_engine
from rltrain.envs.snapshot import capture_problem as gym_problem
from rltrain.envs.snapshot import has_protocol, restore, snapshot
from rltrain.envs.vec_env import GymVecEnv, VecEnv
from rltrain.errors import UserError

# pygame's SDL prints a harmless XDG_RUNTIME_DIR warning per env on headless machines. Only
# there: with a display, an application importing rltrain keeps its pygame windows.
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def make_one_env(cfg: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """One gymnasium env of `cfg`, time limit and `env.wrappers` applied."""
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        raise UserError(f"{cfg.id} is a batched VecEnv: this needs one gymnasium env per row "
                        f"(e.g. for video)")
    if preprocessing(cfg):  # frames, not agent steps, inside: the time limit goes outside
        env = wrap_frames(make_gym_env(source, ale_kwargs(cfg), None, render_mode,
                                      given=dict(cfg.kwargs)), cfg)
        if cfg.max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, cfg.max_episode_steps)
    else:
        env = make_gym_env(source, dict(cfg.kwargs), cfg.max_episode_steps, render_mode)
    return apply_wrappers(env, cfg.wrappers)


GYM_ROWS = (GymVecEnv, GymRowView)
"""Base envs whose rows `resume_state` saves as gymnasium envs: a `GymVecEnv`, or a seed's rows
of one shared by a seed batch (`envs/rows.py`)."""


def _make_vec(cfg: EnvConfig, device: torch.device | str, n: int) -> VecEnv:
    """The unnormalized `VecEnv`: native (backend=torch), the user's batched env, or
    gymnasium's or EnvPool's vector env (`engines/choice.py` picks for backend=auto)."""
    check_env(cfg)
    if cfg.backend == "torch":
        return make_native(cfg.id, n, device, cfg.max_episode_steps, **dict(cfg.kwargs))
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        env = call_factory(source, vec_kwargs(cfg, n, torch.device(device)))
        if not is_vec_env(env):
            raise UserError(f"env factory {cfg.id} returned an object of type {type(env).__name__}, not a VecEnv "
                            f"(needs spec, reset and step; see rltrain/envs/vec_env.py)")
        if env.spec.num_envs != n:
            raise UserError(f"env factory {cfg.id} built {env.spec.num_envs} envs; asked for {n}")
        return ContractChecked(env, cfg.id)
    engine = choose(cfg, n)
    if engine.backend == "envpool":
        venv = make_envpool(cfg, n)
    elif engine.backend == "ale":
        venv = make_ale(cfg, n)
    else:
        venv = _gym_vector(cfg, n)
    env = GymVecEnv(venv, device, name=cfg.id)
    env.engine_note = engine.note
    return env


def _gym_vector(cfg: EnvConfig, n: int) -> gym.vector.VectorEnv:
    """`n` gymnasium envs of `cfg` in one vector env (SAME_STEP autoreset)."""
    fns = [partial(make_one_env, cfg) for _ in range(n)]
    vec_cls = AsyncVectorEnv if cfg.vectorization == "async" else SyncSameStep
    return vec_cls(fns, autoreset_mode=AutoresetMode.SAME_STEP)


def shared_rows(cfg: EnvConfig, seeds: list[int], device: torch.device) -> SharedRows | None:
    """One engine of `len(seeds) x cfg.num_envs` rows for a seed batch, where each seed's single
    run steps EnvPool or gymnasium's `SyncVectorEnv` (chosen as for one seed, so a seed in a
    batch and alone see the same transitions); None otherwise (each seed builds its own envs:
    native and your batched envs, async vector envs, the Atari preprocessing)."""
    n = cfg.num_envs or 1
    if len(seeds) < 2 or cfg.backend == "torch" or resolve_env_id(cfg.id, cfg.imports).batched:
        return None
    check_env(cfg)
    engine, rows = choose(cfg, n), len(seeds) * n
    if engine.backend == "envpool":
        venv = make_envpool(cfg, rows)
    elif cfg.vectorization == "sync" and not preprocessing(cfg):
        venv = row_engine(partial(make_one_env, cfg), rows)
    else:
        return None
    env = GymVecEnv(venv, device, name=cfg.id)
    pool = engine.backend == "envpool"
    said = engine.note or ("envs step with EnvPool" if pool else None)
    env.engine_note = (f"{said + '; ' if said else ''}the {len(seeds)} seeds step one "
                       f"{'engine' if pool else 'vector env'} of {len(seeds)} x {n} rows")
    return SharedRows(env, seeds)


def engine_note(env: VecEnv) -> str | None:
    """The start line on which engine steps `env` and why (`engines/choice.py`), if any."""
    return getattr(_wrappers(env)[-1], "engine_note", None)


def make_env(
    cfg: EnvConfig,
    device: torch.device | str = "cpu",
    *,
    num_envs: int | None = None,
    gamma: float = 0.99,
    training: bool = True,
    base: VecEnv | None = None,
) -> VecEnv:
    """The `VecEnv` of `cfg` (see `_make_vec`), with the normalization wrappers `cfg` asks for.

    Evaluation envs pass `training=False`: statistics stay frozen and rewards are not scaled.
    `base`: the envs to wrap instead of building them (a seed's rows of a shared engine,
    `envs/rows.py`).
    Image observations (3-D) refuse `normalize_obs`: the CNN encoder scales pixels itself; so
    do categorical ones (Discrete, MultiDiscrete, MultiBinary): the network one-hot encodes them.
    """
    # an EnvConfig never validated with its algorithm may leave num_envs unset: the old default
    env = base or _make_vec(cfg, device, num_envs or cfg.num_envs or ON_POLICY_NUM_ENVS)
    if preprocessing(cfg):
        env = wrap_atari_vec(env, cfg, training)
    if cfg.normalize_obs and len(env.spec.obs_shape) == 3:
        env.close()
        raise UserError(f"env.normalize_obs=true would normalize each pixel of {cfg.id}'s image "
                        f"observations {list(env.spec.obs_shape)}; the CNN encoder scales them "
                        f"(uint8 by 1/255) instead: set env.normalize_obs=false")
    if cfg.normalize_obs and env.spec.obs_nvec:
        env.close()
        raise UserError(f"env.normalize_obs=true would normalize {cfg.id}'s categorical "
                        f"observations, which the network one-hot encodes instead: set "
                        f"env.normalize_obs=false")
    if cfg.normalize_obs and env.spec.obs_entries and not normalized_entries(env.spec):
        env.close()
        raise UserError(f"env.normalize_obs=true: {cfg.id}'s observations have no float vector "
                        f"entry to normalize (images and categorical entries never are): set "
                        f"env.normalize_obs=false")
    if cfg.normalize_obs:
        env = NormalizeObs(env, clip=cfg.clip_obs, training=training)
    if cfg.frame_stack > 0:  # after normalizing: each slot is normalized like a single obs
        if len(env.spec.obs_shape) != 1 or env.spec.obs_entries:
            env.close()
            shown = ("Dict / Tuple entries" if env.spec.obs_entries
                     else list(env.spec.obs_shape))
            raise UserError(f"env.frame_stack={cfg.frame_stack} stacks vector observations; "
                            f"{cfg.id}'s are {shown} (images: use env.atari.frame_stack; Dict "
                            f"observations: a recurrent policy, algo=ppo_lstm)")
        env = VectorFrameStack(env, cfg.frame_stack)
    if cfg.normalize_reward and training:
        env = ScaleReward(env, gamma=gamma)
    return env


def env_state(env: VecEnv) -> dict:
    """Normalizer statistics of `env` as plain data (empty when it has none)."""
    return env.state_dict() if isinstance(env, (NormalizeObs, ScaleReward)) else {}


def load_env_state(env: VecEnv, state: dict) -> None:
    """Restore the statistics saved by `env_state`: the observation statistics `env` normalizes
    with (a one-line `UserError` when they are missing or of another shape), and the reward
    statistics where `env` scales rewards and they were saved."""
    for layer in _wrappers(env):
        if isinstance(layer, NormalizeObs):
            why = "the run normalized observations (env.normalize_obs=true)"
            if layer.keys:  # Dict observations: statistics per normalized entry
                saved = state.get("obs_rms")
                shapes = {e.key: e.obs_shape for e in layer.spec.obs_entries}
                for key in layer.keys:
                    _check_rms(saved if isinstance(saved, dict) else {}, key, shapes[key], why,
                               f"env.obs_rms.{key}")
            else:
                _check_rms(state, "obs_rms", tuple(layer.spec.obs_shape), why)
            layer.load_state_dict(state)
        if isinstance(layer, ScaleReward) and "ret_rms" in state:
            _check_rms(state, "ret_rms", (), "")
            layer.rms.load_state_dict(state["ret_rms"])


def _check_rms(state: dict, key: str, shape: tuple[int, ...], why: str,
               field: str | None = None) -> None:
    """Refuse running statistics `state[key]` (checkpoint field `field`, default `env.<key>`)
    that are missing or do not fit `shape`."""
    field = field or f"env.{key}"
    rms = state.get(key)
    if not isinstance(rms, dict) or "mean" not in rms:
        raise UserError(f"checkpoint field {field} is missing; {why}")
    for name in ("mean", "var"):
        value = rms.get(name)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            got = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise UserError(f"checkpoint field {field}.{name} is {got}, expected a tensor of "
                            f"shape {list(shape)} (this env's observations)")
    if type(rms.get("count")) not in (int, float) or not rms["count"] > 0:
        raise UserError(f"checkpoint field {field}.count is {rms.get('count')!r}, expected a "
                        f"number > 0")


def _wrappers(env: VecEnv) -> list[Any]:
    """`env` and the VecEnvs it wraps (normalizers first), down to the base env (last)."""
    out = [env]
    while isinstance(out[-1], (NormalizeObs, ScaleReward, VectorFrameStack, *ATARI_VEC_WRAPPERS)):
        out.append(out[-1].env)
    return out


@dataclass(frozen=True)
class Resumed:
    """What `load_resume_state` restored: true when the episodes continue exactly, else
    `reason` says why they restart (the normalizer statistics are restored either way)."""

    exact: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.exact


def capture_problem(env: VecEnv) -> str | None:
    """None when `resume_state` can save the whole episode state of `env`; else why not."""
    if any(isinstance(layer, VectorFrameStack) for layer in _wrappers(env)):
        return "the observation stack of env.frame_stack is not saved"
    base = _wrappers(env)[-1]
    if isinstance(getattr(base, "capture_problem", None), str):  # a seed's rows of an engine
        return base.capture_problem
    if isinstance(base, GYM_ROWS):
        return gym_problem(base.venv)
    if has_protocol(base):
        return None
    return f"simulator state is not saved ({type(base).__name__} has no sim_state()/load_sim_state())"


def resume_state(env: VecEnv) -> dict:
    """Normalizer statistics, plus everything needed to continue `env`'s episodes exactly
    (reward-scaling return, episode accumulators, simulator state), but the latter only when
    the whole of it can be saved (`capture_problem`): never a part of an episode."""
    out = env_state(env)
    if capture_problem(env) is not None:
        return out
    for layer in _wrappers(env):
        if isinstance(layer, ScaleReward):
            out["running_return"] = layer.running_return.cpu().clone()
    base = _wrappers(env)[-1]
    if isinstance(base, GYM_ROWS):
        out["episode_return"] = torch.from_numpy(base.episode_return.copy())
        out["episode_length"] = torch.from_numpy(base.episode_length.copy())
        out["sim"] = snapshot(base.venv)
        if base.info_mask is not None:  # the info["action_mask"] of the current observations:
            out["info_mask"] = base.info_mask.cpu().clone()  # no env call gives it back
    else:
        out["native"] = base.sim_state()
    return out


def load_resume_state(env: VecEnv, state: dict) -> Resumed:
    """Restore `resume_state`, all or nothing: the normalizer statistics always; the episode
    state only when this env can take all of it, else nothing of it (see `Resumed.reason`)."""
    load_env_state(env, state)
    problem = capture_problem(env)
    if problem is not None:
        return Resumed(False, problem)
    n, base = env.spec.num_envs, _wrappers(env)[-1]
    scale = next((w for w in _wrappers(env) if isinstance(w, ScaleReward)), None)
    saved = {k: state.get(k) for k in ("running_return", "episode_return", "episode_length")}
    wanted = ("episode_return", "episode_length") if isinstance(base, GYM_ROWS) else ()
    wanted += ("running_return",) if scale is not None else ()
    if any(not _rows(saved[k], n) for k in wanted):
        return Resumed(False, "the checkpoint holds no complete episode state for these envs")
    mask = state.get("info_mask")
    if mask is not None and (not isinstance(base, GYM_ROWS) or tuple(mask.shape) != (
            n, sum(base.mask_segments))):
        return Resumed(False, "the saved action masks do not fit these envs")
    if isinstance(base, GYM_ROWS):
        problem = restore(base.venv, state.get("sim"))
    elif not isinstance(state.get("native"), dict) or not base.load_sim_state(state["native"]):
        problem = "the saved simulator state does not fit this env"
    if problem is not None:
        return Resumed(False, problem)
    if scale is not None:
        scale.running_return.copy_(saved["running_return"].to(scale.device))
    if isinstance(base, GYM_ROWS):
        base.episode_return[:] = saved["episode_return"].numpy()
        base.episode_length[:] = saved["episode_length"].numpy()
        if mask is not None:
            base.set_info_mask(mask)
    return Resumed(True)


def _rows(value: Any, n: int) -> bool:
    """A saved per-env vector of this env's `n` rows."""
    return isinstance(value, torch.Tensor) and tuple(value.shape) == (n,)
