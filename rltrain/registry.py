"""Literal name -> spec tables. Adding an algorithm is one line in `ALGOS` (and its traits in
`catalog.ALGO_TRAITS`); nothing registers on import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rltrain.algos import a2c, ddpg, dqn, ppo, sac, td3
from rltrain.catalog import ALGO_TRAITS, SPACE_NAMES
from rltrain.errors import UserError
from rltrain.text import closest


@dataclass(frozen=True)
class AlgoSpec:
    """How to configure and build one algorithm."""

    config: type  # the algorithm's AlgoConfig subclass
    build: Callable[..., Any]  # build(cfg, env_spec, device) -> algorithm
    family: str  # "on_policy" or "off_policy"
    action_kinds: tuple[str, ...]  # action spaces it handles: "discrete", "box", "multi_*"


# family and action spaces come from `catalog.ALGO_TRAITS` (torch-free, read by `rltrain list`)
ALGOS: dict[str, AlgoSpec] = {
    "ppo": AlgoSpec(ppo.PPOConfig, ppo.build, *ALGO_TRAITS["ppo"]),
    "a2c": AlgoSpec(a2c.A2CConfig, a2c.build, *ALGO_TRAITS["a2c"]),
    "dqn": AlgoSpec(dqn.DQNConfig, dqn.build, *ALGO_TRAITS["dqn"]),
    "ddpg": AlgoSpec(ddpg.DDPGConfig, ddpg.build, *ALGO_TRAITS["ddpg"]),
    "td3": AlgoSpec(td3.TD3Config, td3.build, *ALGO_TRAITS["td3"]),
    "sac": AlgoSpec(sac.SACConfig, sac.build, *ALGO_TRAITS["sac"]),
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
            f"algorithms that fit: {', '.join(fits)}"
        )


# LOGGERS (name -> LoggerSpec) is spelled in rltrain/loggers/specs.py, next to `build_loggers`
# that reads it: code under rltrain/loggers must not import this module. One table, re-exported.
from rltrain.loggers.specs import LOGGERS, LoggerSpec  # noqa: E402,F401
