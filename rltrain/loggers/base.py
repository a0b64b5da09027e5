"""A fan-out to several loggers, and building the loggers a config enables (from `LOGGERS`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.loggers.backend import Logger, missing_backend
from rltrain.loggers.config import LoggerConfig
from rltrain.loggers.specs import LOGGERS, LoggerSpec

if TYPE_CHECKING:  # rltrain.types imports torch; the CLI checks the loggers before importing it
    from rltrain.types import Metrics

__all__ = ["Logger", "MultiLogger", "build_loggers", "check_backends"]


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


def enabled_loggers(cfg: LoggerConfig) -> dict[str, LoggerSpec]:
    """The entries of `LOGGERS` that `cfg` switches on, in build order."""
    return {name: spec for name, spec in LOGGERS.items() if spec.enabled(cfg)}


def check_backends(cfg: LoggerConfig) -> None:
    """Raise a one-line `UserError` naming the extra when an enabled backend is not installed.

    Only looks for the package (no import), so the CLI can call it before Hydra creates the run.
    """
    for name, spec in enabled_loggers(cfg).items():
        if spec.package and importlib.util.find_spec(spec.package) is None:
            raise missing_backend(name, spec.package, spec.extra)


def build_loggers(cfg: LoggerConfig, run_dir: Path, purge_step: int = 0,
                  config: dict[str, Any] | None = None) -> MultiLogger:
    """The loggers `cfg` enables, writing under `run_dir`.

    `config` is the composed config as a plain dict; the service loggers (wandb, SwanLab) upload
    it. They are built first, so a missing package or a failed login stops the run before any
    file is written. A resumed run passes its checkpoint step as `purge_step`: whatever the
    interrupted run logged after it is dropped, so curves continue without duplicate steps.
    """
    check_backends(cfg)
    run, loggers = RunDir(run_dir), []
    try:
        for spec in enabled_loggers(cfg).values():
            loggers.append(spec.build(cfg, run, purge_step, config or {}))
    except BaseException:
        MultiLogger(loggers).close()  # e.g. wandb started but SwanLab failed: end the wandb run
        raise
    return MultiLogger(loggers)
