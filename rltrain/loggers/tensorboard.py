"""TensorBoard event files via torch's SummaryWriter."""

from __future__ import annotations

import math
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

from rltrain.types import Metrics


class TensorBoardLogger:
    """One scalar per metric name; non-finite values are skipped (TensorBoard plots them badly)."""

    def __init__(self, log_dir: Path, purge_step: int = 0):
        # purge_step hides events logged after the checkpoint a resumed run starts from
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step + 1 if purge_step else None)

    def log(self, metrics: Metrics, step: int) -> None:
        for name, value in metrics.items():
            if math.isfinite(value):
                self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
