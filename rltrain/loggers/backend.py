"""What a logger is, and the helpers the logger modules share (no logger is built here).

The service loggers (wandb.py, swanlab.py) import these helpers; `specs.py` names the loggers
and `base.py` builds them, so no logger module imports the code that builds it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from rltrain.errors import UserError

if TYPE_CHECKING:  # rltrain.types imports torch; `rltrain --help` reads LOGGERS without it
    from rltrain.types import Metrics


class Logger(Protocol):
    """Receives flat `{name: float}` metrics at an env step."""

    def log(self, metrics: Metrics, step: int) -> None: ...

    def close(self) -> None: ...


def missing_backend(option: str, package: str | None = None, extra: str | None = None) -> UserError:
    """The one-line error for `logger=<option>` whose optional package is not installed."""
    return UserError(f'logger={option} needs {package or option}: '
                     f'pip install "rltrain[{extra or option}]"')


def import_backend(option: str, package: str | None = None, extra: str | None = None) -> ModuleType:
    """Import the package of a service logger (by default named like the option), or raise the
    one-line `UserError` naming the pip extra (by default also named like the option)."""
    try:
        return importlib.import_module(package or option)
    except ImportError:
        raise missing_backend(option, package, extra) from None


def run_name(run_dir: Path) -> str:
    """A readable default run name: the last two parts of the run dir (`2024-05-01/12-00-00`)."""
    return "/".join(Path(run_dir).absolute().parts[-2:])
