"""Check command-line overrides before Hydra runs, so mistakes become one actionable line.

Hydra's own messages span several lines and exit with 1; here the same checks (compose the
config, then validate it) raise `UserError` naming the bad part and the closest valid choices.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from rltrain.config import hydra_texts as texts
from rltrain.config import schema as config
from rltrain.config.grammar import grammar_refusal
from rltrain.config.registry import ALGOS
from rltrain.config.validation import to_train_config
from rltrain.envs.families import legacy_atari_hint, without_legacy_atari
from rltrain.errors import UserError
from rltrain.loggers.base import check_backends
from rltrain.text import closest

if TYPE_CHECKING:
    from rltrain.config.schema import TrainConfig


def check_overrides(overrides: list[str]) -> TrainConfig:
    """Compose `config` with `overrides` (first value of each sweep) and `check_composed` it.
    Expects normalized overrides and registered env options (`rltrain.config.compose` does both)."""
    return check_composed(compose_checked("config", first_of_sweeps(overrides)))


def check_composed(cfg: DictConfig) -> TrainConfig:
    """The validated `TrainConfig` of a composed config, once the packages of the chosen loggers
    are known to be installed and the env to resolve (without building it)."""
    train_cfg = to_train_config(cfg)
    # start-up: gymnasium only for a config that is valid so far (a refused one imports none)
    from rltrain.envs.check import check_env

    check_backends(train_cfg.logger)
    check_env(train_cfg.env)  # imports what env.id / env.imports name: a bad one fails here
    return train_cfg


def first_of_sweeps(overrides: list[str]) -> list[str]:
    """Replace each sweep (`a,b`, `range(...)`, `choice(...)`) by its first value; drop the rest
    of what only a sweeper understands (`interval(...)`, `hydra.*`)."""
    return _sweeps(overrides)[0]


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Command lines that between them give each value of the command line's sweeps once, the
    other sweeps at their first value (`first_of_sweeps` is the first job's): each value a job
    of the grid will get is then composed and checked before any job runs. Combinations of
    values are not (a grid can be large): one refused only together is refused by its job.
    A sweep of more than `SWEEP_CHECK_ALL` numbers gives its first, smallest, largest and
    non-finite values."""
    lines, sweeps = _sweeps(overrides)
    out = []
    for i, key, values in sweeps:
        for value in _to_check(values)[1:]:  # values[0] is the one in `lines`
            out.append([*lines[:i], f"{key}={value}", *lines[i + 1:]])
    return out


SWEEP_CHECK_ALL = 16
"""Sweeps up to this many values have each value checked (a compose is ~0.2 s)."""


def _sweeps(overrides: list[str]) -> tuple[list[str], list[tuple[int, str, list[str]]]]:
    """(the overrides with each sweep at its first value, [(index, key, every value)]); what
    only a sweeper understands (`interval(...)`, `hydra.*`) is dropped."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as exc:  # hydra's OverrideParseException and friends
        why = grammar_refusal(exc) or f"cannot parse overrides: {str(exc).splitlines()[0]}"
        raise UserError(why) from exc
    lines: list[str] = []
    sweeps: list[tuple[int, str, list[str]]] = []
    for ov in parsed:
        key = ov.get_key_element()
        if key.lstrip("+~").startswith("hydra"):
            continue
        if ov.is_sweep_override():
            try:
                values = list(ov.sweep_string_iterator())
            except Exception:  # interval() and other sweeper-only forms have no values
                continue
            if not values:
                continue
            sweeps.append((len(lines), key, values))
            lines.append(f"{key}={values[0]}")
        else:
            lines.append(ov.input_line)
    return lines, sweeps


def _to_check(values: list[str]) -> list[str]:
    """`values` without repeats, first value first; for a long numeric sweep (`seed=range(1000)`)
    only the first, smallest, largest and non-finite ones (range checks: divisibility checks
    of such a sweep are left to its jobs)."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) <= SWEEP_CHECK_ALL:
        return distinct
    try:
        numbers = [float(v) for v in distinct]
    except ValueError:
        return distinct
    finite = [(n, v) for n, v in zip(numbers, distinct, strict=True) if math.isfinite(n)]
    ends = [min(finite)[1], max(finite)[1]] if finite else []
    odd = [v for n, v in zip(numbers, distinct, strict=True) if not math.isfinite(n)]
    return list(dict.fromkeys((distinct[0], *ends, *odd)))


def env_import_overrides(argv: list[str]) -> list[str]:
    """`argv` with `env.import=m` (and `env.imports=m`) spelled `env.imports=[m]`: the field is
    a list named `imports` (`import` is a Python keyword), but one module name is fine to type."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key in ("env.import", "env.imports"):
            simple = value and not value.startswith("[") and "," not in value
            arg = f"env.imports={f'[{value}]' if simple else value}"
        out.append(arg)
    return out


def net_overrides(argv: list[str]) -> list[str]:
    """`argv` with `net.<field>=v` spelled `algo.net.<field>=v`: the network settings live in the
    algorithm's config (every builder receives only `cfg.algo`), `net.` is their short form."""
    out = []
    for arg in argv:
        prefix = arg[:len(arg) - len(arg.lstrip("+~"))]
        rest = arg[len(prefix):]
        if rest.startswith(("net.", "net=")):
            arg = f"{prefix}algo.{rest}"
        out.append(arg)
    return out


def preset_overrides(argv: list[str]) -> list[str]:
    """`argv` plus `~tuned` when it sets `env.id=` and chooses no preset itself: a tuned preset
    is picked by the `env` group option (the default `pendulum` too), and its values (env
    counts, `env.backend=torch`, discount ...) belong to that env, not to the one `env.id` names.
    `tuned=<name>` on the command line still applies a preset explicitly."""
    bare = [arg.lstrip("+~") for arg in argv]
    if any(a.startswith("env.id=") for a in bare) and not any(a.startswith("tuned") for a in bare):
        # right after env.id=: the overrides stay side by side, which Hydra's parser needs
        # (`algo=ppo env.id=X --cfg job ~tuned` is refused: "unrecognized arguments")
        at = next(i for i, a in enumerate(bare) if a.startswith("env.id=")) + 1
        return [*argv[:at], "~tuned", *argv[at:]]
    return argv


def env_choices(argv: list[str]) -> list[str]:
    """Every value given to the `env` group on a command line, sweeps included. The modules of
    `env.imports=` are imported first, so that the ids they register count as gymnasium ids."""
    modules = _env_imports(argv)
    if modules:  # gymnasium comes with envs.custom: only a command line that names modules pays
        # start-up: gymnasium (and the user's modules) only when env.imports= names some
        from rltrain.envs.custom import import_modules

        import_modules(modules)
    values: list[str] = []
    for arg in argv:
        if not arg.startswith(("env=", "+env=")):
            continue
        try:
            (ov,) = OverridesParser.create().parse_overrides([arg])
            values += list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [ov.value()]
        except Exception:  # malformed: compose will report it
            continue
    return [str(v) for v in values]


def _env_imports(argv: list[str]) -> list[str]:
    """The module names given to `env.imports=` (after `env_import_overrides`)."""
    names: list[str] = []
    for arg in argv:
        if not arg.startswith("env.imports="):
            continue
        try:
            (ov,) = OverridesParser.create().parse_overrides([arg])
        except Exception:  # malformed: compose will report it
            continue
        value = ov.value()
        names += [str(v) for v in value] if isinstance(value, list) else []
    return names


def compose_checked(config_name: str, overrides: list[str], *,
                    with_hydra: bool = False) -> DictConfig:
    """`hydra.compose` of a packaged config, with errors turned into one-line `UserError`s
    (`with_hydra`: with its `hydra` node, which `rltrain --help` reads). A caller's own Hydra
    (an `@hydra.main` app or `hydra.initialize` that calls `rltrain.train`) is put back after."""
    callers = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="rltrain.conf", version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=overrides,
                          return_hydra_config=with_hydra)
            app = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]) \
                if with_hydra else cfg
            missing = sorted(OmegaConf.missing_keys(app))
    except Exception as exc:
        raise UserError(_explain_command(exc, config_name)) from exc
    finally:
        GlobalHydra.instance().clear()
        if callers is not None:
            GlobalHydra.instance().initialize(callers)
    if missing:
        raise UserError(f"missing value for {', '.join(missing)}: add `{missing[0]}=...`")
    return cfg


_COMMAND_SCHEMAS = {"eval": "EvalRunConfig", "export": "ExportConfig"}
"""The configs of the commands that read a checkpoint (`rltrain eval`, `rltrain export`)."""


def _explain_command(exc: BaseException, config_name: str) -> str:
    """`explain`, with what only `rltrain eval` and `export` get wrong: a training option
    (`algo=dqn`: the checkpoint fixes algo and env) or a bare path where `ckpt=` was meant."""
    schema = _COMMAND_SCHEMAS.get(config_name)
    if schema is not None:
        fields = ", ".join(f.name for f in dataclasses.fields(getattr(config, schema)))
        text = str(exc)
        m = texts.NO_DEFAULT.search(text)
        if m is not None:
            return (f"unknown field {m.group(1)!r} (algorithm and env come from the "
                    f"checkpoint): valid fields: {fields}")
        m = texts.NOT_KEY_VALUE.search(text)
        if m is not None:
            word = m.group(1)
            if "/" in word or os.sep in word or Path(word).exists():  # a checkpoint or run folder
                return f"{word!r} is not key=value: give the checkpoint as ckpt={word}"
            return f"{word!r} is not key=value: valid fields: {fields}"
    return explain(exc)


def explain(exc: BaseException) -> str:
    """One line for a Hydra/OmegaConf composition error."""
    text = str(exc)
    for cause in _chain(exc):
        if (unread := grammar_refusal(cause)) is not None:  # `ckpt=/tmp/été` of `rltrain eval`
            return unread
    for cause in _chain(exc):
        m = texts.UNKNOWN_KEY.search(str(cause))
        if m is not None:
            return _unknown_field(text, m.group(1), cause)
    m = texts.MISSING_OPTION.search(text)
    if m is not None:
        group, _, option = m.group(1).rpartition("/")
        if group.startswith("env/"):  # env=ALE/Pongg-v5: an id with `/`, not a nested group
            group, option = "env", m.group(1)[len("env/"):]
        options = texts.OPTION_LINE.findall(text)
        options = [o for o in options if not o.endswith("_schema")]
        if group == "env":
            # start-up: gymnasium only to explain an unknown env id
            import gymnasium as gym

            hint = legacy_atari_hint(option)
            if hint is not None:
                return f"unknown env {option!r}: {hint}"
            options = without_legacy_atari([*options, *(k for k in gym.registry if k not in options)])
        return f"unknown {group or 'config'} {option!r}: {closest(option, options)}"
    # Hydra's own message is only "Error merging override ..."; the conversion error is a cause.
    for cause in _chain(exc):
        m = texts.NOT_OPTIONAL.search(str(cause))
        if m is not None:  # `key=null` for a field that always holds a value
            return f"{m.group(1)}=null: expected {_shape(field_type(cause))}, got null"
        found = _conversion_error(str(cause))
        if found is not None:
            value, got, expected = found
            key = _full_key(exc)
            where = f"{key}=" if key else ""
            return f"{where}{value}: expected {expected.lower()}, got {got}"
    m = texts.APPEND.search(text)
    if m is not None:  # a new key of a free-form dict such as env.kwargs
        return f"{m.group(1)} is not set yet: add it with a leading +, as `{m.group(2)}`"
    for cause in _chain(exc):
        m = texts.INVALID_TYPE.search(str(cause))
        if m is not None:
            return f"{_full_key(exc) or 'override'}: expected {_shape(m.group(2))}, got {m.group(1)}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _conversion_error(text: str) -> tuple[str, str, str] | None:
    """(value, its type, the expected type) of an OmegaConf conversion error, else None."""
    m = texts.NOT_CONVERTED.search(text)
    if m is not None:
        return m.group(1), m.group(2), m.group(3)
    m = texts.NOT_VALID.search(text)  # bools say this
    return (m.group(1), m.group(3), m.group(2)) if m is not None else None


def field_type(cause: BaseException) -> str:
    """The annotation of the dataclass field an OmegaConf error names (`float`, `list[int]`)."""
    node, key = getattr(cause, "object_type", None), getattr(cause, "key", None)
    is_schema = isinstance(node, type) and dataclasses.is_dataclass(node)
    fields = dataclasses.fields(node) if is_schema else ()
    return next((str(f.type) for f in fields if f.name == key), "a value")


def _shape(type_name: str) -> str:
    """`a list [a, b]`, or `a mapping {name: ..., kwargs: ...}` for a config dataclass."""
    if type_name in ("ListConfig", "list"):
        return "a list like [a, b]"
    cls = getattr(config, type_name, None)
    if cls is not None and dataclasses.is_dataclass(cls):
        keys = ", ".join(f"{f.name}: ..." for f in dataclasses.fields(cls))
        return f"a mapping {{{keys}}}"
    return f"{'an' if type_name[:1] in 'aeiou' else 'a'} {type_name}"


def _chain(exc: BaseException | None):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _full_key(exc: BaseException) -> str:
    for cause in _chain(exc):
        m = texts.FULL_KEY.search(str(cause))
        if m is not None:
            return m.group(1)
        key = getattr(cause, "full_key", None)
        if key:
            return str(key)
    m = texts.OVERRIDE.search(str(exc))
    return m.group(1) if m else ""


def _unknown_field(text: str, key: str, cause: BaseException) -> str:
    full = _full_key(cause) or key
    prefix = full.rpartition(".")[0]
    node = getattr(cause, "object_type", None)
    fields = []
    if node is not None and hasattr(node, "__dataclass_fields__"):
        fields = list(node.__dataclass_fields__)
    near = [f"{prefix + '.' if prefix else ''}{n}"
            for n in difflib.get_close_matches(key, fields, n=3, cutoff=0.5)]
    if not prefix and "algo" in fields:  # `lr=1e-3`: a field of a section, given at the top
        near = _section_fields_named(key) or near
    hint = ("did you mean " + " or ".join(near) + "?"
            if near else f"valid fields: {', '.join(fields)}" if fields else "")
    return f"unknown field {full!r}" + (f": {hint}" if hint else "")


def _section_fields_named(key: str) -> list[str]:
    """`algo.lr`, `env.num_envs` ...: the fields called `key` of the training config's sections;
    an algorithm field that not every algorithm has names those that do (`algo.n_steps (a2c,
    ppo)`). `name` is left out: it is set by the `algo=` choice."""
    if key == "name":
        return []
    out = []
    having = sorted(n for n, spec in ALGOS.items()
                    if key in {f.name for f in dataclasses.fields(spec.config)})
    if having:
        out.append(f"algo.{key}" + ("" if len(having) == len(ALGOS) else f" ({', '.join(having)})"))
    for name, cls in (("env", config.EnvConfig), ("eval", config.EvalConfig),
                      ("checkpoint", config.CheckpointConfig), ("logger", config.LoggerConfig)):
        if key in {f.name for f in dataclasses.fields(cls)}:
            out.append(f"{name}.{key}")
    return out
