"""Weights & Biases: scalars against `global_step`, the composed config, files in `<run>/wandb/`.

`WANDB_MODE=offline` (or `logger.wandb.mode=offline`) works without network or account; upload
later with `wandb sync <run>/wandb/offline-run-*`. The wandb run id is kept in
`<run>/wandb/run_id`, so `rltrain resume=<run>` continues the same wandb run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import UserError
from rltrain.loggers.backend import import_backend, run_name
from rltrain.loggers.config import WandbConfig
from rltrain.text import first_line
from rltrain.types import Metrics

STEP_KEY = "global_step"


class WandbLogger:
    """One wandb run per rltrain run; every metric is plotted against `global_step` (env steps).

    Metrics are keyed to `global_step` rather than wandb's own step counter, which must only
    grow: a resumed run re-logs the steps after its checkpoint, and wandb would drop them.
    """

    def __init__(self, cfg: WandbConfig, run_dir: Path, config: dict[str, Any],
                 resumed: bool = False):
        wandb = import_backend("wandb")
        id_file = RunDir(run_dir).wandb_run_id
        run_id = id_file.read_text().strip() if resumed and id_file.is_file() else None
        try:
            self.run = wandb.init(
                project=cfg.project, entity=cfg.entity, group=cfg.group,
                tags=list(cfg.tags) or None, name=cfg.name or run_name(run_dir),
                dir=str(run_dir), config=config,
                mode=cfg.mode,  # None: WANDB_MODE decides (an explicit mode would override it)
                id=run_id, resume="allow" if run_id else None)
        except Exception as exc:  # no API key, no network, bad entity ...: wandb's own types
            first = first_line(exc)
            raise UserError(f"wandb: {first} (without an account: WANDB_MODE=offline)") from exc
        if getattr(self.run, "id", None) and not getattr(self.run, "disabled", False):
            id_file.parent.mkdir(parents=True, exist_ok=True)
            id_file.write_text(self.run.id)
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("*", step_metric=STEP_KEY)

    def log(self, metrics: Metrics, step: int) -> None:
        self.run.log({**metrics, STEP_KEY: step})

    def close(self) -> None:
        self.run.finish()
