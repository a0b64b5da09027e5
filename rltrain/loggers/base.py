"""The `Logger` protocol and a fan-out to several loggers."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from rltrain.config import LoggerConfig
from rltrain.types import Metrics


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


def build_loggers(cfg: LoggerConfig, run_dir: Path, purge_step: int = 0) -> MultiLogger:
    """The loggers `cfg` enables, writing under `run_dir`.

    A resumed run passes its checkpoint step as `purge_step`: whatever the interrupted run logged
    after it is dropped, so curves continue without duplicate steps.
    """
    loggers: list[Logger] = []
    if cfg.tensorboard:
        from rltrain.loggers.tensorboard import TensorBoardLogger

        loggers.append(TensorBoardLogger(run_dir / "tb", purge_step))
    if cfg.csv:
        from rltrain.loggers.csv import CSVLogger

        loggers.append(CSVLogger(run_dir / "metrics.csv", purge_step))
    return MultiLogger(loggers)
