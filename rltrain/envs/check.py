"""What can be checked about an `EnvConfig` without building an env (nor importing torch): the
id and the modules it names, the backend, wrapper names, and the keyword arguments of factories,
registered ids and wrappers. The CLI checks here before Hydra starts; `make.py` builds."""

from __future__ import annotations

from typing import Any

from rltrain.envs.atari import check_atari_env
from rltrain.envs.config import EnvConfig
from rltrain.envs.custom import (
    check_call,
    check_registered_kwargs,
    check_wrappers,
    import_modules,
    resolve_env_id,
)
from rltrain.envs.engines.ale import check_ale
from rltrain.envs.engines.envpool import check_envpool
from rltrain.errors import UserError


def check_env_id(env_id: str, imports: list[str] | tuple[str, ...] = ()) -> None:
    """Raise a one-line `UserError` (closest ids, or the import error) when `env_id` names no
    registered id, `module:EnvId` or `module:factory` (see `envs/custom.py`)."""
    resolve_env_id(env_id, imports)


def check_env(cfg: EnvConfig) -> None:
    """Everything about `cfg` that can be checked without building an env: the id (importing
    what it names), the backend, wrapper names and the keyword arguments of factories and
    wrappers. The CLI calls this before Hydra starts, so mistakes cost no run directory."""
    check_atari_env(cfg)
    if cfg.backend == "torch":
        if cfg.wrappers:
            raise UserError("env.wrappers wrap gymnasium envs; env.backend=torch has none "
                            "(use env.backend=gymnasium)")
        if cfg.vectorization == "async":
            raise UserError("env.vectorization=async has no meaning with env.backend=torch "
                            "(the native env steps the whole batch in this process)")
        import_modules(cfg.imports)
        # start-up: torch, which the native envs need; checking a gymnasium env imports none
        from rltrain.envs.native import check_native_kwargs

        check_native_kwargs(cfg.id, dict(cfg.kwargs))
        return
    if cfg.backend == "envpool":
        check_envpool(cfg)
        return
    if cfg.backend == "ale":
        check_ale(cfg)
        return
    source = resolve_env_id(cfg.id, cfg.imports)
    if source.batched:
        if cfg.wrappers:
            raise UserError(f"env.wrappers wrap gymnasium envs; {cfg.id} builds a batched "
                            f"VecEnv (num_envs in its signature), which they cannot wrap")
        if cfg.vectorization == "async":
            raise UserError(f"env.vectorization=async has no meaning for {cfg.id}: it builds "
                            f"the whole batch itself")
        check_call(f"env factory {cfg.id}", source.factory, **vec_kwargs(cfg, 1, "cpu"))
        return
    if source.factory is not None:
        check_call(f"env factory {cfg.id}", source.factory, **dict(cfg.kwargs))
    else:
        check_registered_kwargs(source.env_id, dict(cfg.kwargs))
    check_wrappers(cfg.wrappers)


def vec_kwargs(cfg: EnvConfig, num_envs: int, device: Any) -> dict[str, Any]:
    """The keyword arguments of a batched factory: num_envs, device, time limit, env.kwargs."""
    extra = {} if cfg.max_episode_steps is None else {"max_episode_steps": cfg.max_episode_steps}
    return {"num_envs": num_envs, "device": device, **extra, **dict(cfg.kwargs)}
