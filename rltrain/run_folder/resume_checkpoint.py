"""The checkpoint file `resume=` names (`auto`: an unfinished run's own `latest.pt`; else the
file a run folder or a path names), and the run folder it belongs to. Imports torch (reading a
checkpoint): the start-up path (`find.py`) imports it only when resuming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir


def find_resume_checkpoint(resume: str, run_dir: Path) -> Path | None:
    """The checkpoint `resume=` points at; `auto` means this run dir's latest.pt, if any."""
    if resume == "auto":
        paths = RunDir(run_dir)
        return paths.latest if paths.latest.is_file() and not paths.final.exists() else None
    return checkpoint.resolve(resume)


def run_dir_of(ckpt: Path) -> Path:
    """`<run>` for `<run>/checkpoints/x.pt`."""
    return RunDir.of_checkpoint(ckpt).root


def load_for_resume(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load a checkpoint to resume from (same checks as any load)."""
    return checkpoint.load(path, map_location=device)
