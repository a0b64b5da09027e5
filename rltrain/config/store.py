"""Hydra's ConfigStore: the typed schemas, and the `env` / `tuned` options a command line can name.

`register_configs` stores the dataclass schemas of `rltrain.config.schema`, one option per env alias and
per gymnasium id named on the command line, and the forwards that give an alias and its id the
same tuned preset (`tuned/<algo>_<gym id>` -> `tuned/<algo>_<alias>`, every Atari game ->
`<algo>_atari`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from importlib import resources
from typing import Any

from hydra.core.config_store import ConfigStore

from rltrain.config.registry import ALGOS
from rltrain.config.schema import ENV_ALIASES, EnvConfig, EvalRunConfig, ExportConfig, TrainConfig
from rltrain.envs.families import family_of, register_on_demand


def register_configs(env_ids: Iterable[str] | None = None) -> None:
    """Store the schemas, env aliases and tuned-preset aliases in Hydra's ConfigStore.

    `env_ids` limits the generic `env=<gymnasium id>` entries to those ids (the CLI passes the
    ones on its command line: every stored entry makes each Hydra compose slower); None stores
    every registered id.
    """
    _share_in_repository_copies(ConfigStore)
    cs = ConfigStore.instance()
    _store(cs, None, "train_schema", TrainConfig)
    _store(cs, None, "eval_schema", EvalRunConfig)
    _store(cs, None, "export_schema", ExportConfig)
    _store(cs, "env", "env_schema", EnvConfig)
    # no logger schema node: conf/logger/*.yaml each switch one backend on and must not reset the
    # others when listed together (`logger=[tensorboard,wandb]`); TrainConfig types their fields
    for name, spec in ALGOS.items():
        _store(cs, "algo", f"{name}_schema", spec.config)
    _register_env_options(cs, env_ids)


def _share_in_repository_copies(store_type: type) -> None:
    """Let Hydra's repository copies share the ConfigStore singleton instead of copying it.

    Every compose deep-copies Hydra's config repository (`CachingConfigRepository`, to keep the
    search-path sources it adds apart), and with it the ConfigStore and every node stored there:
    ~30 ms a compose with rltrain's schemas, and Hydra's own `--help` listing composes 94 times
    (2.9 s; 0.2 s shared, the same text: tests/e2e/test_startup.py compares it). Sharing is
    what a fresh repository does anyway (its sources read `ConfigStore.instance()`), and
    nothing writes through a copy: sources only read the store, and `ConfigStore.load` hands out
    a deep copy of the node it loads.
    """
    if "__deepcopy__" not in vars(store_type):
        store_type.__deepcopy__ = lambda self, memo: self


_STORED: dict[tuple[str | None, str], tuple[Any, str | None, Any]] = {}
"""(group, name) -> (a copy of the node, package, the entry made) of each `_store`."""


def _store(cs: Any, group: str | None, name: str, node: Any, package: str | None = None) -> None:
    """`cs.store` unless this very entry is in the store already. Storing converts the node to
    an OmegaConf config (~8 ms each; a compose stores ~55): every compose after the first in a
    process (sweeps, the API, tests) skips the ones it would only repeat."""
    done = _STORED.get((group, name))
    entry = _entry(cs, group, name)
    if entry is not None and done is not None and done[2] is entry and done[1] == package \
            and done[0] == node:
        return
    cs.store(group=group, name=name, node=node, package=package)
    _STORED[(group, name)] = (node if isinstance(node, type) else copy.deepcopy(node), package,
                              _entry(cs, group, name))


def _entry(cs: Any, group: str | None, name: str) -> Any:
    """The ConfigStore entry `group/name`, or None."""
    folder: Any = cs.repo
    for part in group.split("/") if group else ():
        folder = folder.get(part, {})
    return folder.get(f"{name}.yaml")


def _yaml_names(group: str) -> set[str]:
    folder = resources.files("rltrain.conf").joinpath(group)
    return {p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml")}


def preset_env_name(option: str) -> str | None:
    """The `<env>` of the tuned presets `conf/tuned/<algo>_<env>.yaml` that apply to the env
    option `option`: an alias names itself and its gymnasium id names the alias
    (`HalfCheetah-v5` -> `halfcheetah`), every Atari game (`ALE/...` id or alias) is `atari`;
    None for any other id. A preset file that does not exist simply means no preset."""
    gym_id = ENV_ALIASES.get(option, option)
    if family_of(gym_id) == "atari":
        return "atari"
    if option in ENV_ALIASES:
        return option
    return next((short for short, i in ENV_ALIASES.items() if i == option), None)


def _store_option(cs: Any, group: str, option: str, node: Any, **kw: Any) -> None:
    """Store `node` as `group=option`; an option with `/` (`ALE/Pong-v5`) is a nested group."""
    sub, _, name = option.rpartition("/")
    _store(cs, f"{group}/{sub}" if sub else group, name, node, **kw)


def _register_env_options(cs: Any, env_ids: Iterable[str] | None) -> None:
    """Let `env=<alias>` and `env=<gymnasium id>` work: the aliases (their YAML, else their id),
    each alias's gymnasium id forwarding to it, and a generic node for the ids named (`ALE/`
    ids are registered on demand; `env=module:EnvId` too: its module is imported, and checked,
    when the config is). `tuned=<algo>_<option>` forwards to the preset of `preset_env_name`,
    so both spellings, and every Atari game, get their preset."""
    env_yamls = _yaml_names("env")
    tuned = _yaml_names("tuned")
    for short, gym_id in ENV_ALIASES.items():
        if short not in env_yamls:
            _store(cs, "env", short, _env_node(gym_id))
        _store_option(cs, "env", gym_id, {"defaults": [f"/env/{short}@_here_"]})
    env_ids = None if env_ids is None else list(env_ids)
    named = _known_ids(env_ids)
    aliased = set(ENV_ALIASES.values())
    for gym_id in named:
        if gym_id not in aliased and gym_id not in env_yamls:
            _store_option(cs, "env", gym_id, _env_node(gym_id))
    # preset forwards only for the options named (all of them when every id is stored)
    named_options = {*ENV_ALIASES, *aliased} if env_ids is None else {*named, *env_ids}
    for option in named_options:
        env_name = preset_env_name(option)
        for preset in tuned:  # <algo>_<env>, where <algo> may hold a `_` itself (ppo_lstm)
            if env_name is not None and preset.endswith("_" + env_name) and option != env_name:
                algo = preset[: -len(env_name) - 1]
                _store_option(cs, "tuned", f"{algo}_{option}", {"defaults": ["/tuned/" + preset]},
                              package="_global_")


def _env_node(gym_id: str) -> dict[str, Any]:
    """The option of an env id with no YAML of its own: `EnvConfig` with that id, written as a
    YAML in conf/env/ would be (a small dict stores and composes faster than the dataclass)."""
    return {"defaults": ["env_schema", "_self_"], "id": gym_id}


def _known_ids(env_ids: list[str] | None) -> list[str]:
    """Every registered gymnasium id (`env_ids` None), else the ids of `env_ids` that gymnasium
    knows or that name a module (`module:EnvId`). gymnasium is imported only when there is an id
    to look up: `rltrain --help`, and a command line without `env=`, never pay for it."""
    if env_ids == []:
        return []
    # start-up: gymnasium only when an env id is named (its registry is read)
    import gymnasium as gym

    if env_ids is None:
        return list(gym.registry)
    for env_id in env_ids:
        register_on_demand(env_id)  # ALE/ ids: only when named, as importing ale-py is slow
    return [i for i in env_ids if i in gym.registry or ":" in i]
