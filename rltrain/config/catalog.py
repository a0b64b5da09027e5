"""What rltrain offers, without importing torch: the algorithm table (`ALGORITHMS`, which the
registry names `ALGOS`), the `algo=` options, env aliases, tuned presets and optional extras.
`rltrain list` prints it all in one table in a fraction of a second."""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rltrain.envs.aliases import ENV_ALIASES
from rltrain.envs.families import EXTRAS as FAMILY_EXTRAS
from rltrain.envs.families import family_of

ALL_ACTIONS = ("discrete", "box", "multi_discrete", "multi_binary")


@dataclass(frozen=True)
class AlgoEntry:
    """Everything rltrain needs to know of one algorithm: its config class and its module as
    import paths, loaded on first use (the config class is torch-free; the module, with torch,
    is imported only when a run builds it) and its action spaces. Its module's `stack(members,
    streams)`, where there is one, is its form for a batch of seeds (the fast `num_seeds > 1`);
    without one a seed batch runs each seed's own algorithm in turn (`runner/members.py`)."""

    config_path: str
    """`module:Class` of its config dataclass (`algos/configs/`)."""
    module: str
    """The module of its class, whose `build(cfg, env_spec, device)` builds it."""
    action_kinds: tuple[str, ...]
    """The action spaces it handles (`SPACE_NAMES` keys)."""

    @property
    def config(self) -> type:
        """Its config class (an `AlgoConfig` subclass; the Hydra schema `<name>_schema`)."""
        module, _, name = self.config_path.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def family(self) -> str:
        """`on_policy` or `off_policy`, the loop that trains it: its config class's base."""
        from rltrain.algos.configs.base import OffPolicyConfig, OnPolicyConfig

        config = self.config
        for base, family in ((OnPolicyConfig, "on_policy"), (OffPolicyConfig, "off_policy")):
            if issubclass(config, base):
                return family
        raise ValueError(f"{self.config_path} derives from neither OnPolicyConfig nor "
                         f"OffPolicyConfig: no loop can train it")

    def build(self, cfg: Any, spec: Any, device: Any = "cpu") -> Any:
        """The algorithm for `cfg` and the env `spec` on `device`: its module's `build`."""
        return importlib.import_module(self.module).build(cfg, spec, device)

    def stack(self) -> Any:
        """Its module's `stack(members, streams)` (the algorithm for a batch of seeds), or None
        where it has none."""
        return getattr(importlib.import_module(self.module), "stack", None)


ALGORITHMS: dict[str, AlgoEntry] = {
    "ppo": AlgoEntry("rltrain.algos.configs.ppo:PPOConfig", "rltrain.algos.ppo", ALL_ACTIONS),
    "a2c": AlgoEntry("rltrain.algos.configs.a2c:A2CConfig", "rltrain.algos.a2c", ALL_ACTIONS),
    "pqn": AlgoEntry("rltrain.algos.configs.pqn:PQNConfig", "rltrain.algos.pqn", ("discrete",)),
    "dqn": AlgoEntry("rltrain.algos.configs.dqn:DQNConfig", "rltrain.algos.dqn", ("discrete",)),
    "qrdqn": AlgoEntry("rltrain.algos.configs.qrdqn:QRDQNConfig", "rltrain.algos.qrdqn",
                       ("discrete",)),
    "ddpg": AlgoEntry("rltrain.algos.configs.ddpg:DDPGConfig", "rltrain.algos.ddpg", ("box",)),
    "td3": AlgoEntry("rltrain.algos.configs.td3:TD3Config", "rltrain.algos.td3", ("box",)),
    "sac": AlgoEntry("rltrain.algos.configs.sac:SACConfig", "rltrain.algos.sac", ("box",)),
    "tqc": AlgoEntry("rltrain.algos.configs.tqc:TQCConfig", "rltrain.algos.tqc", ("box",)),
    "trpo": AlgoEntry("rltrain.algos.configs.trpo:TRPOConfig", "rltrain.algos.trpo", ALL_ACTIONS),
    "crossq": AlgoEntry("rltrain.algos.configs.crossq:CrossQConfig", "rltrain.algos.crossq",
                        ("box",)),
    "ars": AlgoEntry("rltrain.algos.configs.ars:ARSConfig", "rltrain.algos.ars",
                     ("discrete", "box")),
}
"""The one table of algorithms (`registry.ALGOS` is this dict): adding one is its file, its
config, one entry here and its YAML (`conf/algo/`); the registry, `rltrain list`, the config
store and seed batches read it, and an entry added at run time (a test's) is known to all."""

SPACE_NAMES = {"discrete": "Discrete", "box": "Box", "multi_discrete": "MultiDiscrete",
               "multi_binary": "MultiBinary"}
"""Action kind -> the gymnasium space's name, for messages and `rltrain list`."""

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    **{extra: (what, modules) for what, extra, modules in FAMILY_EXTRAS.values()},
    "sweep": ("Optuna searches, joblib launcher", ("hydra_plugins.hydra_optuna_sweeper", "optuna",
                                                   "hydra_plugins.hydra_joblib_launcher", "sklearn")),
    "slurm": ("SLURM launcher (submitit)", ("hydra_plugins.hydra_submitit_launcher",)),
    "ray": ("Ray launcher", ("hydra_plugins.hydra_ray_launcher", "ray")),
    "video": ("eval videos (PyAV)", ("av",)),
    "export": ("ONNX export and check", ("onnx", "onnxscript", "onnxruntime")),
    "wandb": ("logger=wandb", ("wandb",)),
    "swanlab": ("logger=swanlab", ("swanlab",)),
    "bench": ("SB3 side of the benchmarks", ("stable_baselines3", "sb3_contrib")),
}
"""pip extra -> (what it is for, the modules it installs)."""


@dataclass(frozen=True)
class AlgoOption:
    """One `algo=<option>` (conf/algo/<option>.yaml) and the algorithm it builds."""

    option: str
    algo: str
    summary: str


def _conf(group: str) -> list[tuple[str, str]]:
    """(option name, file text) of every YAML of a conf group, sorted by name."""
    folder = resources.files("rltrain.conf").joinpath(group)
    return sorted((p.name[: -len(".yaml")], p.read_text()) for p in folder.iterdir()
                  if p.name.endswith(".yaml"))


def algo_options() -> list[AlgoOption]:
    """Every `algo=` option: its registry algorithm (the schema its YAML fills) and the first
    words of its comment."""
    out = []
    for option, text in _conf("algo"):
        schema = [line.strip()[2:-len("_schema")] for line in text.splitlines()
                  if line.strip().startswith("- ") and line.strip().endswith("_schema")]
        algo = schema[0] if schema else option  # `- ppo_schema`: the config class it fills
        first = next((line.lstrip("# ").strip() for line in text.splitlines()
                      if line.startswith("#")), "")
        out.append(AlgoOption(option, algo, first.split(":")[0].split(" (")[0]))
    return out


def env_files() -> dict[str, str]:
    """`env=` options of their own YAML (conf/env/<option>.yaml) that no alias names, such as
    `pixel_cartpole` -> the `id:` the file sets."""
    out = {}
    for option, text in _conf("env"):
        found = re.search(r"^id:\s*(\S+)", text, flags=re.M)
        if found is not None and option not in ENV_ALIASES:
            out[option] = found.group(1)
    return out


def presets() -> dict[str, list[str]]:
    """Env name (an alias, or `atari` for every ALE game) -> the algo options with a tuned
    preset for it (`conf/tuned/<algo>_<env>.yaml`)."""
    options = sorted((o.option for o in algo_options()), key=len, reverse=True)
    envs = {*ENV_ALIASES, "atari"}
    out: dict[str, list[str]] = {}
    for name, _ in _conf("tuned"):
        algo = next((o for o in options if name.startswith(o + "_") and name[len(o) + 1:] in envs),
                    None)
        if algo is not None:
            out.setdefault(name[len(algo) + 1:], []).append(algo)
    return {env: sorted(algos) for env, algos in sorted(out.items())}


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be found (found by name: nothing is imported)."""
    missing = []
    for module in EXTRAS[extra][1]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package that is missing or broken
            found = False
        if not found:
            missing.append(module)
    return missing


def env_family(env_id: str) -> str:
    """The extra an env id needs, or "" for one that gymnasium alone provides."""
    family = family_of(env_id)
    return FAMILY_EXTRAS[family][1] if family else ""
