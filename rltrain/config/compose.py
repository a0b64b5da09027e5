"""The one way from a command line, or a Python override list, to a validated `TrainConfig`.

The CLI, `rltrain.train` and the tests all go through `compose_train_config`: it rewrites the
command line's short forms (`normalize_overrides`), registers the env options it names, composes
`conf/config.yaml` (the first value of each sweep), validates the result and checks what can be
checked before anything is built: the logger packages and the env (its id, the modules it
imports, its kwargs and wrappers). Every mistake is a one-line `UserError`.

Validation runs once per run: the CLI checks before Hydra starts (`compose_job`) and hands the
result to Hydra's job by argument; the job takes it (`train_config_of`) when Hydra composed the
same config, as a single run does; a multirun job with other values validates its own. Nothing
is kept between calls: no module-level cache.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rltrain.config.hydra_texts import GROUP_NOT_STRING, NOT_OPTIONAL
from rltrain.config.overrides import (
    check_composed,
    compose_checked,
    env_choices,
    env_import_overrides,
    field_type,
    first_of_sweeps,
    net_overrides,
    preset_overrides,
    sweep_variants,
)
from rltrain.config.registry import check_action_space
from rltrain.config.schema import TrainConfig
from rltrain.config.store import register_configs
from rltrain.config.validation import to_train_config
from rltrain.errors import UserError


@dataclass(frozen=True)
class Composed:
    """A configuration composed and validated once (`compose_job`), handed to the job that runs
    it so that the job neither composes nor validates it again."""

    overrides: tuple[str, ...]
    """As composed: normalized, the first value of each sweep."""
    resolved: dict[str, Any]
    """The composed config, resolved."""
    train_cfg: TrainConfig
    """Its validated `TrainConfig` (kept apart: callers get copies)."""


def normalize_overrides(argv: list[str]) -> list[str]:
    """`argv` with its short forms spelled as the config tree needs them.

    `env.import=m` becomes `env.imports=[m]`, `net.<field>=v` becomes `algo.net.<field>=v`, and
    `~tuned` is added when `env.id=` names the env and no preset is chosen (a preset belongs to
    the `env` option, not to the env `env.id` names). Already normalized lists are unchanged.
    """
    return preset_overrides(net_overrides(env_import_overrides(list(argv))))


def register_options(overrides: list[str]) -> None:
    """Make the env options `overrides` name known to Hydra (importing `env.imports=` first)."""
    register_configs(env_choices(overrides))


def compose_train_config(overrides: list[str] | None = None, *,
                         normalized: bool = False) -> TrainConfig:
    """The validated `TrainConfig` of `overrides` (a command line; sweeps give their first
    value, `hydra.*` and flags are ignored); raise a one-line `UserError` for any mistake.

    `normalized=True`: `overrides` already went through `normalize_overrides`.
    """
    return copy.deepcopy(compose_job(overrides, normalized=normalized).train_cfg)


def compose_job(overrides: list[str] | None = None, *, normalized: bool = False) -> Composed:
    """`compose_train_config`, with what the job that runs it reuses: the resolved composition
    (`composed_dict`) and the validated config (`train_config_of`)."""
    overrides = list(overrides or [])
    if not normalized:
        overrides = normalize_overrides(overrides)
    register_options(overrides)
    first = first_of_sweeps([a for a in overrides if not a.startswith("-")])
    _refuse_schemas(first)
    composed = compose_naming_choices("config", first)
    train_cfg = check_composed(composed)
    resolved: Any = OmegaConf.to_container(composed, resolve=True)
    return Composed(tuple(first), resolved, train_cfg)


_NULL = re.compile(r"\+{0,2}([\w.@/-]+)=null", re.IGNORECASE)
"""`key=null` (Hydra reads null in any case)."""


def compose_naming_choices(config_name: str, overrides: list[str],
                           check: Callable[[DictConfig], Any] = check_composed) -> DictConfig:
    """`compose_checked` of `config_name` (`config`, `eval`, `export`), where `key=null` for a
    string field or a group that must hold a value is refused as `check` (that config's own
    checks) refuses any other bad value, naming the choices (`env.backend`, export's `format`)."""
    try:
        return compose_checked(config_name, overrides)
    except UserError as exc:
        nulls = [m.group(1) if m else None for m in map(_NULL.fullmatch, overrides)]
        key = _null_refused(exc, [k for k in nulls if k])
        if key is None:
            raise
        # the same override as the string 'null': the field's own check names what it takes
        retry = [f"{key}='null'" if k == key else a for a, k in zip(overrides, nulls, strict=True)]
        try:
            check(compose_checked(config_name, retry))
        except UserError as err:
            if "null" in str(err):  # about this value, not another override's
                raise UserError(str(err).replace("'null'", "null", 1)) from exc
        raise


def _null_refused(exc: BaseException, keys: list[str]) -> str | None:
    """Which of the `key=null` overrides `keys` Hydra refused in `exc`, if that was the error."""
    while exc.__cause__ or exc.__context__:
        exc = exc.__cause__ or exc.__context__  # Hydra's message is on the innermost
    field = NOT_OPTIONAL.search(str(exc))
    if field is not None:  # a string field: other types say what they expect already
        return field.group(1) if field.group(1) in keys and field_type(exc) == "str" else None
    if GROUP_NOT_STRING in str(exc):  # `env=null`
        return next((k for k in keys if "." not in k), None)
    return None


def _refuse_schemas(overrides: list[str]) -> None:
    """`algo=dqn_schema` (a typed schema Hydra lists beside the options) is not an option: it
    skips the option's YAML (`algo=dqn`'s defaults) and would train with the bare dataclass."""
    for arg in overrides:
        key, _, value = arg.lstrip("+~").partition("=")
        if key in ("algo", "env") and value.endswith("_schema"):
            option = value.removesuffix("_schema")
            hint = f"use {key}={option}" if option != key else f"choose an {key}= option"
            raise UserError(f"{key}={value} is the typed schema behind the {key} options, not "
                            f"an option: {hint} (rltrain list shows them)")


def check_sweep(overrides: list[str], composed: Composed | None = None) -> None:
    """A multirun: each value of its sweeps composed and checked as its jobs will be, so
    `algo=ppo,dqnn` is one line before any job runs; then every algorithm of the sweep against
    every env of it (`algo=ppo,dqn env=Pendulum-v1`: DQN cannot handle Box actions), each env
    built once to read its action space. Expects normalized overrides with their env options
    registered; `composed`: the first values', when already checked (`compose_job`)."""
    plain = [a for a in overrides if not a.startswith("-")]
    first = (composed.train_cfg if composed is not None
             and composed.overrides == tuple(first_of_sweeps(plain))
             else check_composed(compose_checked("config", first_of_sweeps(plain))))
    configs = [first, *(check_composed(compose_checked("config", v))
                        for v in sweep_variants(plain))]
    algos = sorted({c.algo.name for c in configs})
    envs = {c.env.id: c.env for c in configs}
    if len(algos) > 1 or len(envs) > 1:  # one pair: its first job checks it at once
        _check_action_spaces(algos, envs)


def _check_action_spaces(algos: list[str], envs: dict[str, Any]) -> None:
    """Each algorithm against each env's action space (`check_action_space`)."""
    # start-up: torch only to check an env's action space (composing imports none)
    from rltrain.envs.make import make_env

    for env_id, env_cfg in envs.items():
        env = make_env(env_cfg, num_envs=1, training=False)
        kind = env.spec.action_kind
        env.close()
        for algo in algos:
            check_action_space(algo, kind, env_id)


def composed_dict(overrides: list[str], composed: Composed | None = None) -> dict[str, Any]:
    """The resolved dict of `config` composed with `overrides` (normalized, without sweeps):
    `composed`'s when it was made from the same overrides, else composed now."""
    if composed is not None and composed.overrides == tuple(overrides):
        return copy.deepcopy(composed.resolved)
    resolved: Any = OmegaConf.to_container(compose_checked("config", overrides), resolve=True)
    return resolved


def train_config_of(cfg: DictConfig, composed: Composed | None = None) -> TrainConfig:
    """The validated `TrainConfig` of a config Hydra composed for a job: `composed`'s (the
    command line's, checked before Hydra started) when it is the same configuration, else
    validated now (a sweep's other jobs)."""
    if composed is not None and OmegaConf.to_container(cfg, resolve=True) == composed.resolved:
        return copy.deepcopy(composed.train_cfg)
    return to_train_config(cfg)
