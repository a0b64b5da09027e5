"""The `Logger` protocol, a fan-out to several loggers, and building them from the config."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from rltrain.config import LoggerConfig
from rltrain.errors import UserError
from rltrain.types import Metrics

# logger option -> (module it imports, pip extra that installs it)
BACKENDS: dict[str, tuple[str, str]] = {"wandb": ("wandb", "wandb"), "swanlab": ("swanlab", "swanlab")}


class Logger(Protocol):
    """Receives flat `{name: float}` metrics at an env step."""

    def log(self, metrics: Metrics, step: int) -> None: ...

    def close(self) -> None: ...


class MultiLogger:
    """Sends every call to each logger in turn."""

    def __init__(self, loggers: list[Logger]):
        self.loggers = loggers

    def log(self, metrics: Metrics, step: int) -> None:
        if metrics:
            for logger in self.loggers:
                logger.log(metrics, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def _missing(option: str) -> UserError:
    module, extra = BACKENDS[option]
    return UserError(f'logger={option} needs {module}: pip install "rltrain[{extra}]"')


def check_backends(cfg: LoggerConfig) -> None:
    """Raise a one-line `UserError` naming the extra when an enabled backend is not installed.

    Only looks for the package (no import), so the CLI can call it before Hydra creates the run.
    """
    for option, (module, _) in BACKENDS.items():
        if getattr(cfg, option).enabled and importlib.util.find_spec(module) is None:
            raise _missing(option)


def import_backend(option: str) -> ModuleType:
    """Import the package of a service logger, or raise the one-line `UserError`."""
    try:
        return importlib.import_module(BACKENDS[option][0])
    except ImportError:
        raise _missing(option) from None


def run_name(run_dir: Path) -> str:
    """A readable default run name: the last two parts of the run dir (`2024-05-01/12-00-00`)."""
    return "/".join(Path(run_dir).absolute().parts[-2:])


def build_loggers(cfg: LoggerConfig, run_dir: Path, purge_step: int = 0,
                  config: dict[str, Any] | None = None) -> MultiLogger:
    """The loggers `cfg` enables, writing under `run_dir`.

    `config` is the composed config as a plain dict; the service loggers (wandb, SwanLab) upload
    it. They are built first, so a missing package or a failed login stops the run before any
    file is written. A resumed run passes its checkpoint step as `purge_step`: whatever the
    interrupted run logged after it is dropped, so curves continue without duplicate steps.
    """
    check_backends(cfg)
    loggers: list[Logger] = []
    try:
        if cfg.wandb.enabled:
            from rltrain.loggers.wandb import WandbLogger

            loggers.append(WandbLogger(cfg.wandb, run_dir, config or {}, resumed=purge_step > 0))
        if cfg.swanlab.enabled:
            from rltrain.loggers.swanlab import SwanlabLogger

            loggers.append(SwanlabLogger(cfg.swanlab, run_dir, config or {},
                                         resumed=purge_step > 0))
    except BaseException:
        MultiLogger(loggers).close()  # e.g. wandb started but SwanLab failed: end the wandb run
        raise
    if cfg.tensorboard:
        from rltrain.loggers.tensorboard import TensorBoardLogger

        loggers.append(TensorBoardLogger(run_dir / "tb", purge_step))
    if cfg.csv:
        from rltrain.loggers.csv import CSVLogger

        loggers.append(CSVLogger(run_dir / "metrics.csv", purge_step))
    return MultiLogger(loggers)
