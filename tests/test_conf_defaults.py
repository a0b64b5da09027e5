"""One source of defaults: no YAML under conf/ repeats the dataclass default it would shadow.

A value in `conf/` that equals the default beneath it says nothing, and silently stops agreeing
when the dataclass changes. Each YAML is read against what it overrides: an algo file against
its `<Algo>Config`, a tuned preset against its algorithm's and env file's values, and so on. A
repetition that is meant (a file naming its own env id, `logger=none` switching every backend
off even after another option) carries `# deliberate: <why>` on its line or its parent's.
"""

from __future__ import annotations

from importlib import resources
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf

from rltrain.config.registry import ALGOS
from rltrain.config.schema import EnvConfig, EvalRunConfig, ExportConfig, LoggerConfig, TrainConfig

CONF = resources.files("rltrain.conf")
ALGO_OPTIONS = sorted(p.name[:-5] for p in CONF.joinpath("algo").iterdir() if p.name.endswith(".yaml"))
"""The `algo=` options: one YAML each (`ppo`, `ppo_lstm`, ...)."""
MARKER = "# deliberate:"
# settings of Hydra and its plugins: no rltrain dataclass lies beneath them
NO_SCHEMA = ("hpo/", "hydra/")
HYDRA_KEYS = ("defaults", "hydra")


def yaml_files() -> list[str]:
    """Every YAML of the config tree, as a path relative to conf/ (`algo/ppo.yaml`)."""
    found: list[str] = []

    def walk(folder: Any, prefix: str) -> None:
        for item in folder.iterdir():
            if item.is_dir():
                walk(item, f"{prefix}{item.name}/")
            elif item.name.endswith(".yaml"):
                found.append(prefix + item.name)

    walk(CONF, "")
    return sorted(found)


def text_of(path: str) -> str:
    """The text of conf/<path>."""
    return CONF.joinpath(*PurePosixPath(path).parts).read_text()


def values_of(path: str) -> dict[str, Any]:
    """The YAML's own values (its defaults list and hydra settings left out)."""
    data = yaml.safe_load(text_of(path)) or {}
    return {k: v for k, v in data.items() if k not in HYDRA_KEYS}


def structured(schema: type) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(schema))  # type: ignore[return-value]


def algo_schema(option: str) -> dict[str, Any]:
    """The defaults of the dataclass an `algo=<option>` file names (`- ppo_schema`)."""
    defaults = yaml.safe_load(text_of(f"algo/{option}.yaml")).get("defaults", [])
    schema = next(d for d in defaults if isinstance(d, str) and d.endswith("_schema"))
    return structured(ALGOS[schema.removesuffix("_schema")].config)


def algo_values(option: str) -> dict[str, Any]:
    """What `algo=<option>` gives: its schema's defaults with its file's values over them
    (`ppo_lstm`: PPO's, with `recurrent: lstm` and its own sizes)."""
    return {**algo_schema(option), **values_of(f"algo/{option}.yaml")}


def train_defaults(algo: str | None = None, env_file: str | None = None) -> dict[str, Any]:
    """TrainConfig's defaults, with an algorithm option's values and an env file's when given."""
    cfg = structured(TrainConfig)
    if algo is not None:
        cfg["algo"] = algo_values(algo)
    if env_file is not None:
        cfg["env"].update(values_of(env_file))
    return cfg


def shadowed(path: str) -> dict[str, Any]:
    """What the values of the YAML at `path` override, as a plain dict."""
    group, _, name = path.removesuffix(".yaml").rpartition("/")
    if group == "algo":
        return algo_schema(name)
    if group == "env":
        return structured(EnvConfig)
    if group == "logger":
        return structured(LoggerConfig)
    if group == "tuned":  # a preset is picked by <algo>_<env option>: it sits on both
        algo = max((a for a in ALGO_OPTIONS if name.startswith(a + "_")), key=len)  # ppo_lstm
        env = name[len(algo) + 1:]  # an env without a YAML (halfcheetah, atari) is its id
        env_file = f"env/{env}.yaml" if CONF.joinpath("env", f"{env}.yaml").is_file() else None
        return train_defaults(algo, env_file)
    if group == "debug" or path == "config.yaml":
        return train_defaults()
    if path in ("eval.yaml", "export.yaml"):
        return structured(EvalRunConfig if path == "eval.yaml" else ExportConfig)
    raise AssertionError(f"conf/{path}: no known dataclass lies beneath it; teach this test")


def key_lines(text: str) -> dict[str, int]:
    """The 0-based line of every mapping key of a YAML text, by dotted path."""
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                dotted = f"{prefix}{key.value}"
                lines[dotted] = key.start_mark.line
                walk(value, dotted + ".")

    root = yaml.compose(text)
    if root is not None:
        walk(root, "")
    return lines


def repeated(values: dict[str, Any], beneath: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys of `values` whose value equals the one beneath (leaves and whole lists)."""
    found: list[str] = []
    for key, value in values.items():
        if not isinstance(beneath, dict) or key not in beneath:
            continue
        under = beneath[key]
        if isinstance(value, dict) and isinstance(under, dict):
            found += repeated(value, under, f"{prefix}{key}.")
        elif value == under and type(value) is not dict:
            found.append(prefix + key)
    return found


def is_marked(dotted: str, text: str, lines: dict[str, int]) -> bool:
    """True when the key's line, or the line of one of its parents, carries the marker."""
    source = text.splitlines()
    parts = dotted.split(".")
    return any(MARKER in source[lines[".".join(parts[:n])]] for n in range(len(parts), 0, -1))


CHECKED = [p for p in yaml_files() if not p.startswith(NO_SCHEMA)]


def test_the_config_tree_is_found():
    assert {"config.yaml", "algo/ppo.yaml", "env/pendulum.yaml", "tuned/ppo_pendulum.yaml",
            "logger/none.yaml"} <= set(CHECKED)


@pytest.mark.parametrize("path", CHECKED)
def test_no_yaml_value_repeats_the_default_it_shadows(path):
    text = text_of(path)
    lines = key_lines(text)
    redundant = [key for key in repeated(values_of(path), shadowed(path))
                 if not is_marked(key, text, lines)]
    assert not redundant, (
        f"conf/{path} repeats the value beneath it for {', '.join(redundant)}: delete the line "
        f"(the dataclass is the one source of a default), or mark it `{MARKER} <why>`")


def test_a_repeated_value_is_found_and_a_marked_one_is_allowed():
    text = "defaults:\n  - ppo_schema\ngamma: 0.99\nlr: 1.0e-3\nn_steps: 2048  # deliberate: x\n"
    values = {k: v for k, v in yaml.safe_load(text).items() if k != "defaults"}
    found = repeated(values, structured(ALGOS["ppo"].config))
    assert found == ["gamma", "n_steps"]
    assert [k for k in found if not is_marked(k, text, key_lines(text))] == ["gamma"]


def test_every_algorithm_has_a_yaml_that_names_its_schema():
    for name in ALGOS:
        data = yaml.safe_load(text_of(f"algo/{name}.yaml"))
        assert data["defaults"][0] == f"{name}_schema"
