"""Your own environments: `module:Id` ids, `env.imports`, factories, and wrappers by name.

`env.id` takes three forms:

- `CartPole-v1`: a registered gymnasium id (registered by gymnasium, or by a module listed in
  `env.imports`, which is imported first).
- `my_pkg.envs:Maze-v0`: import `my_pkg.envs` (its import registers `Maze-v0`), then
  `gymnasium.make("Maze-v0")`, exactly what gymnasium's own `module:id` form does.
- `my_pkg.envs:make_maze`: a factory, any callable (function or class) in that module. When its
  signature has a `num_envs` parameter it is *batched*: called once as
  `make_maze(num_envs=N, device=torch.device, **env.kwargs)` and returns a native `VecEnv`
  (torch tensors in and out, built without any gymnasium adapter). Otherwise it is called once
  per env as `make_maze(**env.kwargs)` and returns a `gymnasium.Env`.

`env.wrappers` lists gymnasium wrappers applied to every (non-batched) env, innermost first:
`{name: ClipReward, kwargs: {min_reward: -1, max_reward: 1}}`; a name is a class of
`gymnasium.wrappers` or a `module:Class`. Every failure is a one-line `UserError`.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from rltrain.envs.families import (
    family_of,
    legacy_atari_hint,
    register_on_demand,
    require_extra,
    without_legacy_atari,
)
from rltrain.envs.mujoco_log import route_mujoco_warnings
from rltrain.errors import UserError
from rltrain.text import closest, first_line


@dataclass(frozen=True)
class EnvSource:
    """Where the envs of an `env.id` come from."""

    env_id: str
    """The gymnasium id to `gymnasium.make`, or the `module:name` text of a factory."""
    factory: Callable[..., Any] | None = None
    """None for a registered id; else the user's callable."""
    batched: bool = False
    """The factory builds the whole batch (`num_envs` in its signature) and returns a VecEnv."""

def import_module(name: str) -> ModuleType:
    """Import a user module; a failure is one line naming it and the original error.

    The current folder is searched too (last), as `python -m` would: the `rltrain` script alone
    would not find a `my_envs.py` lying beside the user.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UserError(f"cannot import env module {name!r}: {first_line(exc)}") from exc
    except Exception as exc:  # the module's own code raised while importing
        raise UserError(f"cannot import env module {name!r}: "
                        f"{type(exc).__name__}: {first_line(exc)}") from exc


def import_modules(names: Iterable[str]) -> None:
    """Import each of `names` (`env.imports`), so the ids they register exist."""
    for name in names:
        import_module(name)


def resolve_env_id(env_id: str, imports: Iterable[str] = ()) -> EnvSource:
    """What `env_id` names (see the module docstring), importing what it needs; a one-line
    `UserError` with the closest valid names when it names nothing."""
    import_modules(imports)
    if ":" not in env_id:
        register_on_demand(env_id)  # ALE/ ids: registered by importing ale-py, only when used
        check_registered(env_id)
        require_extra(env_id)  # MuJoCo, Box2D, Atari: one line naming the pip extra
        if family_of(env_id) == "mujoco":
            route_mujoco_warnings()  # its C-level warnings as log lines, once each
        return EnvSource(env_id)
    module_name, _, name = env_id.partition(":")
    if not module_name or not name or ":" in name:
        raise UserError(f"env.id={env_id!r}: expected a gymnasium id, `module:EnvId` or "
                        f"`module:factory`")
    module = import_module(module_name)
    if name in gym.registry:
        return EnvSource(name)
    obj = getattr(module, name, None)
    if obj is None:
        options = [*_public_callables(module), *gym.registry]
        raise UserError(f"module {module_name!r} registers no env {name!r} and has no factory of "
                        f"that name: {closest(name, options)}")
    if not callable(obj):
        raise UserError(f"env.id={env_id!r}: {name} is a {type(obj).__name__}, not a gymnasium "
                        f"env class or an env factory")
    return EnvSource(env_id, obj, takes_num_envs(obj))


def check_registered(env_id: str) -> None:
    """Raise a one-line `UserError` naming the closest ids when `env_id` is not registered."""
    hint = legacy_atari_hint(env_id)  # refused even once an ALE run registered it: as in a new process
    if env_id not in gym.registry or hint is not None:
        raise UserError(f"unknown env {env_id!r}: {hint or _near_ids(env_id)}")


def _near_ids(env_id: str) -> str:
    near = closest(env_id, current_versions(without_legacy_atari(gym.registry), env_id))
    if near.startswith("did you mean"):
        return near + " (an env of your own: env.id=module:EnvId or env.imports=module)"
    return "see `rltrain --help`; an env of your own: env.id=module:EnvId or env.imports=module"


_VERSIONED = re.compile(r"(.+)-v(\d+)")


def current_versions(ids: list[str], typed: str) -> list[str]:
    """`ids` less the older versions of a name registered in a newer one (`Hopper-v3` beside
    `Hopper-v5`: it needs mujoco-py, and gymnasium deprecates it), unless `typed` asks for that
    version: the ids worth suggesting for a mistyped `typed`."""
    newest: dict[str, int] = {}
    for k in ids:
        m = _VERSIONED.fullmatch(k)
        if m:
            newest[m[1]] = max(newest.get(m[1], -1), int(m[2]))
    asked = _VERSIONED.fullmatch(typed)
    version = int(asked[2]) if asked else None
    return [k for k in ids if not (m := _VERSIONED.fullmatch(k))
            or int(m[2]) in (newest[m[1]], version)]


def takes_num_envs(fn: Callable[..., Any]) -> bool:
    """True when `fn`'s signature has a `num_envs` parameter: it builds the whole batch."""
    try:
        return "num_envs" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def check_call(what: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Refuse arguments `fn` cannot take, before anything is built (one line naming `what`)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise UserError(f"{what}: {exc}") from exc


# keyword arguments `gymnasium.make` consumes itself rather than passing to the env
_MAKE_KWARGS = ("max_episode_steps", "disable_env_checker")


def check_registered_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse `env.kwargs` the entry point of a registered id cannot take, before anything is
    built: `gymnasium.make` passes them, over the id's registered kwargs, to that entry point."""
    spec = gym.spec(env_id)
    creator = spec.entry_point
    if isinstance(creator, str):
        try:
            creator = load_env_creator(creator)
        except Exception:  # noqa: BLE001 - e.g. a missing optional backend: make reports it
            return
    if not callable(creator):
        return
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [k for k in kwargs if k not in params and k not in _MAKE_KWARGS]
    if unknown:
        takes = ", ".join(k for k, p in params.items() if p.kind is not p.VAR_POSITIONAL)
        raise UserError(f"env.kwargs.{unknown[0]}: {env_id} takes "
                        f"{takes or 'no keyword arguments'} (see {spec.entry_point})")


def call_factory(source: EnvSource, kwargs: dict[str, Any]) -> Any:
    """Call the user's factory; an exception it raises becomes one line naming it."""
    assert source.factory is not None
    try:
        return source.factory(**kwargs)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"env factory {source.env_id} failed: {type(exc).__name__}: "
                        f"{first_line(exc)}") from exc


def make_gym_env(source: EnvSource, kwargs: dict[str, Any], max_episode_steps: int | None,
                 render_mode: str | None = None, *, given: dict[str, Any] | None = None,
                 ) -> gym.Env:
    """One gymnasium env of a registered id or a per-env factory, with its time limit.

    `given`: the part of `kwargs` the user set (`env.kwargs`; default: all of `kwargs`), named
    when the registered id's constructor refuses them."""
    given = dict(kwargs) if given is None else dict(given)
    kwargs = dict(kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if source.factory is None:
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        return _make_registered(source.env_id, kwargs, given)
    env = call_factory(source, kwargs)
    if not isinstance(env, gym.Env):
        hint = (" (a batched env: give the factory `num_envs` and `device` parameters)"
                if is_vec_env(env) else "")
        raise UserError(f"env factory {source.env_id} returned an object of type {type(env).__name__}, not a "
                        f"gymnasium.Env{hint}")
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    return env


def _make_registered(env_id: str, kwargs: dict[str, Any], given: dict[str, Any]) -> gym.Env:
    """`gymnasium.make(env_id, **kwargs)`; whatever its constructor raises on the user's
    `env.kwargs` (`given`) becomes one line naming the id and those kwargs, as a factory's
    failure does (`call_factory`): Hopper's `frame_skip=0` divides by zero, its `xml_file` of a
    missing file is an OSError, LunarLander's `gravity` out of range an AssertionError."""
    try:
        return gym.make(env_id, **kwargs)
    except UserError:
        raise
    except (ModuleNotFoundError, gym.error.DependencyNotInstalled) as exc:  # phys2d/: jax
        raise UserError(f"env {env_id} needs a package that is not installed: "
                        f"{type(exc).__name__}: {first_line(exc)}") from exc
    except ImportError as exc:  # `cannot import name ...`: the env's own code, or shimmy's
        raise UserError(f"env {env_id} failed to import what it needs: "
                        f"{type(exc).__name__}: {first_line(exc)}") from exc
    except Exception as exc:
        if not given and not isinstance(exc, TypeError):
            raise  # the registered env itself failed, not the user's input: a bug to report
        named = ", ".join(f"env.kwargs.{k}={_shown(v)}" for k, v in given.items())
        raise UserError(f"env {env_id}: {type(exc).__name__}: {first_line(exc)} (check "
                        f"{named or 'env.kwargs'})") from exc


def _shown(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters: a long list must not make the line a page."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_vec_env(obj: Any) -> bool:
    """Duck typing of the `VecEnv` contract: a `spec` (`EnvSpec`-like), `reset` and `step`."""
    spec = getattr(obj, "spec", None)
    return (callable(getattr(obj, "reset", None)) and callable(getattr(obj, "step", None))
            and all(hasattr(spec, k) for k in ("obs_shape", "action_kind", "action_dim",
                                              "num_envs")))


def resolve_wrapper(name: str) -> type:
    """The wrapper class `name` names: a `gymnasium.wrappers` class or `module:Class`."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        cls = getattr(import_module(module_name), attr, None)
        if cls is None:
            raise UserError(f"unknown wrapper {name!r}: module {module_name!r} has no {attr!r}")
    else:
        options = [n for n in gym.wrappers.__all__ if n != "vector"]
        if name not in options:
            raise UserError(f"unknown wrapper {name!r}: {closest(name, options)} (or module:Class)")
        try:
            cls = getattr(gym.wrappers, name)
        except ImportError as exc:  # wrappers with optional dependencies (jax, array_api_compat)
            raise UserError(f"wrapper {name} needs a package that is missing: "
                            f"{first_line(exc)}") from exc
    if not (isinstance(cls, type) and issubclass(cls, gym.Wrapper)):
        raise UserError(f"wrapper {name!r} is not a gymnasium.Wrapper subclass")
    return cls


def check_wrappers(wrappers: Iterable[Any]) -> None:
    """Resolve every wrapper of `env.wrappers` and check its kwargs, without building anything."""
    for w in wrappers:
        check_call(f"env.wrappers {w.name}", resolve_wrapper(w.name), None, **dict(w.kwargs))


def apply_wrappers(env: gym.Env, wrappers: Iterable[Any]) -> gym.Env:
    """`env` inside each wrapper of `env.wrappers`, in order (the first is innermost)."""
    for w in wrappers:
        cls = resolve_wrapper(w.name)
        kwargs = dict(w.kwargs)
        if ":" not in w.name:  # gymnasium's own: shapes are tuples (ResizeObservation(shape=
            # (64, 64)) refuses a list), and a command line or YAML can only write lists
            kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
        try:
            env = cls(env, **kwargs)
        except Exception as exc:
            raise UserError(f"env.wrappers {w.name}: {type(exc).__name__}: "
                            f"{first_line(exc)}") from exc
    return env


def _public_callables(module: ModuleType) -> list[str]:
    return [k for k, v in vars(module).items() if callable(v) and not k.startswith("_")]


