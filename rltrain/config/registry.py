"""Literal name -> spec tables. Adding an algorithm is one line in `ALGOS` (and its traits in
`catalog.ALGO_TRAITS`); nothing registers on import.

Importing this module imports no torch: `ALGOS` holds the torch-free config classes of
`algos/configs/`, and each built-in builder imports its algorithm module (and torch with it) only
when a run builds one, so composing, validating and `rltrain --help` never pay for torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.a2c import A2CConfig
from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.configs.td3 import TD3Config
from rltrain.config.catalog import ALGO_TRAITS, SPACE_NAMES
from rltrain.errors import UserError
from rltrain.text import closest


@dataclass(frozen=True)
class AlgoSpec:
    """How to configure and build one algorithm."""

    config: type  # the algorithm's AlgoConfig subclass
    build: Callable[..., Any]  # build(cfg, env_spec, device) -> algorithm
    family: str  # "on_policy" or "off_policy"
    action_kinds: tuple[str, ...]  # action spaces it handles: "discrete", "box", "multi_*"


# The built-in builders: each imports its algorithm module on its first call.
def _build_ppo(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import ppo

    return ppo.build(cfg, spec, device)


def _build_a2c(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import a2c

    return a2c.build(cfg, spec, device)


def _build_dqn(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import dqn

    return dqn.build(cfg, spec, device)


def _build_ddpg(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import ddpg

    return ddpg.build(cfg, spec, device)


def _build_td3(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import td3

    return td3.build(cfg, spec, device)


def _build_sac(cfg: Any, spec: Any, device: Any = "cpu") -> Any:
    from rltrain.algos import sac

    return sac.build(cfg, spec, device)


# family and action spaces come from `catalog.ALGO_TRAITS` (torch-free, read by `rltrain list`)
ALGOS: dict[str, AlgoSpec] = {
    "ppo": AlgoSpec(PPOConfig, _build_ppo, *ALGO_TRAITS["ppo"]),
    "a2c": AlgoSpec(A2CConfig, _build_a2c, *ALGO_TRAITS["a2c"]),
    "dqn": AlgoSpec(DQNConfig, _build_dqn, *ALGO_TRAITS["dqn"]),
    "ddpg": AlgoSpec(DDPGConfig, _build_ddpg, *ALGO_TRAITS["ddpg"]),
    "td3": AlgoSpec(TD3Config, _build_td3, *ALGO_TRAITS["td3"]),
    "sac": AlgoSpec(SACConfig, _build_sac, *ALGO_TRAITS["sac"]),
}


def get_algo_spec(name: str) -> AlgoSpec:
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
        import inspect

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
