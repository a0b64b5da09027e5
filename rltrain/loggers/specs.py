"""LOGGERS: the literal name -> spec table of the metric loggers (re-exported by registry.py).

It lives here, not in registry.py, because `build_loggers` reads it and no module under
`rltrain.loggers` may import `rltrain.config.registry` (which imports every algorithm's config).
Each builder imports its logger module when called, so an optional package (wandb, SwanLab,
TensorBoard's writer) is imported only when its logger is chosen. Adding a logger is one line
in `LOGGERS` plus its module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.loggers.backend import Logger
from rltrain.loggers.config import LoggerConfig

Builder = Callable[[LoggerConfig, RunDir, int, dict[str, Any]], Logger]


@dataclass(frozen=True)
class LoggerSpec:
    """How to switch on and build one logger."""

    option: str  # the LoggerConfig field that switches it on: a bool, or a section with `enabled`
    build: Builder  # build(logger cfg, run dir, purge step, composed config as a dict)
    package: str | None = None  # the optional package it needs (checked before anything is built)
    extra: str | None = None  # the pip extra that installs `package`

    def enabled(self, cfg: LoggerConfig) -> bool:
        """True when `cfg` switches this logger on."""
        value = getattr(cfg, self.option)
        return value if isinstance(value, bool) else value.enabled


def _wandb(cfg: LoggerConfig, run: RunDir, purge_step: int, config: dict[str, Any]) -> Logger:
    # optional extra: wandb, for logger=wandb only (`pip install "rltrain[wandb]"`)
    from rltrain.loggers.wandb import WandbLogger

    return WandbLogger(cfg.wandb, run.root, config, resumed=purge_step > 0)


def _swanlab(cfg: LoggerConfig, run: RunDir, purge_step: int, config: dict[str, Any]) -> Logger:
    # optional extra: SwanLab, for logger=swanlab only (`pip install "rltrain[swanlab]"`)
    from rltrain.loggers.swanlab import SwanlabLogger

    return SwanlabLogger(cfg.swanlab, run.root, config, resumed=purge_step > 0)


def _tensorboard(cfg: LoggerConfig, run: RunDir, purge_step: int, config: dict[str, Any]) -> Logger:
    # start-up: tensorboard (most of a second) only for logger=tensorboard
    from rltrain.loggers.tensorboard import TensorBoardLogger

    return TensorBoardLogger(run.tb, purge_step, config)


def _csv(cfg: LoggerConfig, run: RunDir, purge_step: int, config: dict[str, Any]) -> Logger:
    # start-up: a logger's module only when a run builds it (composing a config imports none)
    from rltrain.loggers.csv import CSVLogger

    return CSVLogger(run.metrics_csv, purge_step)


# Built in this order: the service loggers first, so a missing package or a failed login stops
# the run before any file is written.
LOGGERS: dict[str, LoggerSpec] = {
    "wandb": LoggerSpec("wandb", _wandb, package="wandb", extra="wandb"),
    "swanlab": LoggerSpec("swanlab", _swanlab, package="swanlab", extra="swanlab"),
    "tensorboard": LoggerSpec("tensorboard", _tensorboard),
    "csv": LoggerSpec("csv", _csv),
}
