"""Name -> spec tables. An algorithm is one entry in `catalog.ALGORITHMS` (its config class,
module, traits and batched form, as import paths); `ALGOS` is that table; nothing registers on
import.

Importing this module imports no torch: an entry imports its torch-free config class when
asked for it, and its algorithm module (and torch with it) only when a run builds one, so
composing, validating and `rltrain --help` never pay for torch."""

from __future__ import annotations

import inspect

from rltrain.config.catalog import ALGORITHMS, SPACE_NAMES, AlgoEntry
from rltrain.errors import UserError
from rltrain.text import closest

ALGOS: dict[str, AlgoEntry] = ALGORITHMS
"""Registry key -> how to configure and build it: `catalog.ALGORITHMS` itself, not a copy."""


def get_algo_spec(name: str) -> AlgoEntry:
    """Look up an algorithm by registry key, with a helpful error for unknown names."""
    if name not in ALGOS:
        raise UserError(f"unknown algo {name!r}: {closest(name, tuple(ALGOS))}")
    return ALGOS[name]


def check_action_space(algo: str, action_kind: str, env_id: str) -> None:
    """Refuse an algorithm / action-space pair that cannot work, before anything is built."""
    spec = get_algo_spec(algo)
    if action_kind not in spec.action_kinds:
        fits = sorted(k for k, s in ALGOS.items() if action_kind in s.action_kinds)
        space = SPACE_NAMES.get(action_kind, action_kind)
        raise UserError(
            f"algo={algo} cannot handle {env_id}'s {space} action space; "
            f"algorithms that fit: {', '.join(fits)}{_continuous_hint(env_id, action_kind)}"
        )


def _continuous_hint(env_id: str, action_kind: str) -> str:
    """For an env whose constructor takes `continuous` (CarRacing, LunarLander): the registered
    id of its other action space where there is one (`LunarLanderContinuous-v3`, which has its
    presets), else how to get that space from it. None for Atari ids, whose preprocessing steps
    discrete actions. Asked only on the error path (it imports the env's module)."""
    if action_kind not in ("box", "discrete") or env_id.startswith("ALE/"):
        return ""
    sibling = _sibling_id(env_id, to_continuous=action_kind == "discrete")
    if sibling is not None:
        return f"; or env={sibling} is its {'Box' if action_kind == 'discrete' else 'Discrete'} version"
    try:
        # start-up: gymnasium only on this error path (the table imports neither torch nor gymnasium)
        import gymnasium as gym
        from gymnasium.envs.registration import load_env_creator

        entry = gym.spec(env_id).entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        if "continuous" not in inspect.signature(creator).parameters:
            return ""
    except Exception:  # noqa: BLE001 - an id of the user's own, a module that fails: no hint
        return ""
    other = ("false", "Discrete") if action_kind == "box" else ("true", "Box")
    return f"; or +env.kwargs.continuous={other[0]} gives {env_id} {other[1]} actions"


def _sibling_id(env_id: str, to_continuous: bool) -> str | None:
    """`LunarLanderContinuous-v3` for `LunarLander-v3` (and back) when gymnasium registers it."""
    # start-up: gymnasium only on this error path (the table imports neither torch nor gymnasium)
    import gymnasium as gym

    name, sep, version = env_id.rpartition("-v")
    if not sep:
        return None
    other = (f"{name}Continuous-v{version}" if to_continuous
             else f"{name.removesuffix('Continuous')}-v{version}")
    return other if other != env_id and other in gym.registry else None


# LOGGERS (name -> LoggerSpec) is spelled in rltrain/loggers/specs.py, next to `build_loggers`
# that reads it: code under rltrain/loggers must not import this module. One table, re-exported.
from rltrain.loggers.specs import LOGGERS, LoggerSpec  # noqa: E402,F401
