"""Hydra's ConfigStore: the typed schemas, and the `env` / `tuned` options a command line can name.

`register_configs` stores the dataclass schemas of `rltrain.config`, one option per env alias and
per gymnasium id named on the command line, and the forwards that give an alias and its id the
same tuned preset (`tuned/<algo>_<gym id>` -> `tuned/<algo>_<alias>`, every Atari game ->
`<algo>_atari`).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

from rltrain.config import ENV_ALIASES, EnvConfig, EvalRunConfig, ExportConfig, TrainConfig


def register_configs(env_ids: Iterable[str] | None = None) -> None:
    """Store the schemas, env aliases and tuned-preset aliases in Hydra's ConfigStore.

    `env_ids` limits the generic `env=<gymnasium id>` entries to those ids (the CLI passes the
    ones on its command line: every stored entry makes each Hydra compose slower); None stores
    every registered id.
    """
    from hydra.core.config_store import ConfigStore

    from rltrain.registry import ALGOS

    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="eval_schema", node=EvalRunConfig)
    cs.store(name="export_schema", node=ExportConfig)
    cs.store(group="env", name="env_schema", node=EnvConfig)
    # no logger schema node: conf/logger/*.yaml each switch one backend on and must not reset the
    # others when listed together (`logger=[tensorboard,wandb]`); TrainConfig types their fields
    for name, spec in ALGOS.items():
        cs.store(group="algo", name=f"{name}_schema", node=spec.config)
    _register_env_options(cs, env_ids)


def _yaml_names(group: str) -> set[str]:
    folder = resources.files("rltrain.conf").joinpath(group)
    return {p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml")}


def preset_env_name(option: str) -> str | None:
    """The `<env>` of the tuned presets `conf/tuned/<algo>_<env>.yaml` that apply to the env
    option `option`: an alias names itself and its gymnasium id names the alias
    (`HalfCheetah-v5` -> `halfcheetah`), every Atari game (`ALE/...` id or alias) is `atari`;
    None for any other id. A preset file that does not exist simply means no preset."""
    from rltrain.envs.families import family_of

    gym_id = ENV_ALIASES.get(option, option)
    if family_of(gym_id) == "atari":
        return "atari"
    if option in ENV_ALIASES:
        return option
    return next((short for short, i in ENV_ALIASES.items() if i == option), None)


def _store_option(cs: Any, group: str, option: str, node: Any, **kw: Any) -> None:
    """Store `node` as `group=option`; an option with `/` (`ALE/Pong-v5`) is a nested group."""
    sub, _, name = option.rpartition("/")
    cs.store(group=f"{group}/{sub}" if sub else group, name=name, node=node, **kw)


def _register_env_options(cs: Any, env_ids: Iterable[str] | None) -> None:
    """Let `env=<alias>` and `env=<gymnasium id>` work: the aliases (their YAML, else their id),
    each alias's gymnasium id forwarding to it, and a generic node for the ids named (`ALE/`
    ids are registered on demand; `env=module:EnvId` too: its module is imported, and checked,
    when the config is). `tuned=<algo>_<option>` forwards to the preset of `preset_env_name`,
    so both spellings, and every Atari game, get their preset."""
    import gymnasium as gym

    from rltrain.envs.families import register_on_demand

    env_yamls = _yaml_names("env")
    tuned = _yaml_names("tuned")
    for short, gym_id in ENV_ALIASES.items():
        if short not in env_yamls:
            cs.store(group="env", name=short, node=EnvConfig(id=gym_id))
        _store_option(cs, "env", gym_id, {"defaults": [f"/env/{short}@_here_"]})
    for env_id in env_ids or ():
        register_on_demand(env_id)  # ALE/ ids: only when named, as importing ale-py is slow
    named = [i for i in env_ids or () if i in gym.registry or ":" in i]
    aliased = set(ENV_ALIASES.values())
    for gym_id in gym.registry if env_ids is None else named:
        if gym_id not in aliased and gym_id not in env_yamls:
            _store_option(cs, "env", gym_id, EnvConfig(id=gym_id))
    # preset forwards only for the options named (all of them when every id is stored)
    named_options = {*ENV_ALIASES, *aliased} if env_ids is None else {*named, *env_ids}
    for option in named_options:
        env_name = preset_env_name(option)
        for preset in tuned:
            algo, _, preset_env = preset.partition("_")
            if env_name is not None and preset_env == env_name and option != env_name:
                _store_option(cs, "tuned", f"{algo}_{option}", {"defaults": ["/tuned/" + preset]},
                              package="_global_")
