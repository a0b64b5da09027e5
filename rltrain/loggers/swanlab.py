"""SwanLab: scalars and the composed config, offline by default, files in `<run>/swanlog/`.

Offline runs need no account; upload later with `swanlab sync <run>/swanlog/run-*`. The run id
is kept in `<run>/swanlog/run_id`, so `rltrain resume=<run>` continues the same experiment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import UserError
from rltrain.loggers.backend import import_backend, run_name
from rltrain.loggers.config import SwanlabConfig
from rltrain.text import first_line
from rltrain.types import Metrics


class SwanlabLogger:
    """One SwanLab experiment per rltrain run, logged at env steps."""

    def __init__(self, cfg: SwanlabConfig, run_dir: Path, config: dict[str, Any],
                 resumed: bool = False):
        swanlab = import_backend("swanlab")
        log_dir = RunDir(run_dir).swanlog
        id_file = log_dir / "run_id"
        run_id = id_file.read_text().strip() if resumed and id_file.is_file() else None
        try:
            self.run = swanlab.init(
                project=cfg.project, workspace=cfg.workspace, group=cfg.group,
                tags=list(cfg.tags) or None, name=cfg.name or run_name(run_dir),
                log_dir=str(log_dir), config=config, mode=cfg.mode,
                id=run_id, resume="allow" if run_id else None)
        except Exception as exc:  # no API key, no network ...: swanlab's own types
            first = first_line(exc)
            raise UserError(f"swanlab: {first} (without an account: logger.swanlab.mode=offline)"
                            ) from exc
        run_id = getattr(self.run, "id", None)
        if run_id and cfg.mode != "disabled":
            log_dir.mkdir(parents=True, exist_ok=True)
            id_file.write_text(str(run_id))

    def log(self, metrics: Metrics, step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()
