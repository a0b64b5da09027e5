"""`rltrain --help`: Hydra's application help, written without Hydra's `app_help`.

Hydra 1.3 lists each config group's options through a fresh copy of its whole config repository,
ConfigStore included (~25 ms per copy here, ~90 copies for rltrain's groups): its `--help` took
~2.5 s before printing. The text here is the same (`tests/e2e/test_startup.py` compares the two):
`hydra.help.template` with the groups read once from `conf/` and the ConfigStore, and the config
composed with the command line. A command line this cannot serve exactly (other Hydra flags,
`hydra.*` overrides, a template asking for Hydra's own groups or flags) goes to Hydra as before.
"""

from __future__ import annotations

import string
from importlib import resources
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf, open_dict

from rltrain.config.overrides import compose_checked, first_of_sweeps

HELP_FLAGS = ("--help", "-h")
_HYDRA_ONLY = ("$FLAGS_HELP", "${FLAGS_HELP}", "$HYDRA_CONFIG_GROUPS", "${HYDRA_CONFIG_GROUPS}")


def app_help(argv: list[str]) -> str | None:
    """The text `rltrain <argv>` prints for `--help` (env options already registered), or None
    when Hydra must write it itself."""
    flags = [a for a in argv if a.startswith("-")]
    overrides = [a for a in argv if not a.startswith("-")]
    if not flags or any(f not in HELP_FLAGS for f in flags) \
            or any(a.lstrip("+~").startswith("hydra") for a in overrides):
        return None
    cfg = compose_checked("config", first_of_sweeps(overrides), with_hydra=True)
    template = str(cfg.hydra.help.template)
    if any(name in template for name in _HYDRA_ONLY):
        return None
    with open_dict(cfg):
        del cfg["hydra"]
    groups = "".join(f"{group}: {', '.join(names)}\n" for group, names in config_groups().items())
    return string.Template(template).substitute(APP_CONFIG_GROUPS=groups,
                                                CONFIG=OmegaConf.to_yaml(cfg))


def config_groups() -> dict[str, list[str]]:
    """Group -> its sorted options, as Hydra's help lists them: the YAML files under `conf/` and
    the ConfigStore's entries, a nested group (`env/ALE`) on its own; `hydra/` groups left out."""
    found: dict[str, set[str]] = {}
    _add_folder(resources.files("rltrain.conf"), "", found)

    _add_store(ConfigStore.instance().repo, "", found)
    return {group: sorted(options) for group, options in sorted(found.items())
            if options and group.split("/")[0] != "hydra"}


def _add_folder(folder: Any, group: str, found: dict[str, set[str]]) -> None:
    for entry in folder.iterdir():
        if entry.name in ("__pycache__", "__init__.py"):
            continue
        if entry.is_dir():
            _add_folder(entry, f"{group}/{entry.name}".lstrip("/"), found)
        elif group and entry.name.endswith(".yaml"):
            found.setdefault(group, set()).add(entry.name[: -len(".yaml")])


def _add_store(node: dict[str, Any], group: str, found: dict[str, set[str]]) -> None:
    for name, value in node.items():
        if isinstance(value, dict):
            _add_store(value, f"{group}/{name}".lstrip("/"), found)
        elif group and name.endswith(".yaml"):
            found.setdefault(group, set()).add(name[: -len(".yaml")])
