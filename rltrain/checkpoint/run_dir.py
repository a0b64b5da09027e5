"""RunDir: the name of every file and folder in a run folder, in one place.

A run folder (docs/logging.md, "Run directory") holds everything needed to reproduce, resume, evaluate
or export one run. Code that reads or writes one of its files asks a `RunDir` for the path
instead of spelling the name again. Nothing here touches the disk except the probes that end
`RunDir`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rltrain.errors import UserError

HYDRA = ".hydra"  # also Hydra's `hydra.output_subdir` (conf/hydra), relative to the run folder
CHECKPOINTS = "checkpoints"
LATEST, BEST, FINAL = "latest.pt", "best.pt", "final.pt"
PERIODIC_GLOB = "step_*.pt"
METRICS_CSV = "metrics.csv"
TB = "tb"
TB_EVENTS_GLOB = "events.out.tfevents.*"


@dataclass(frozen=True)
class RunDir:
    """A run folder; its properties name its files (none needs to exist)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of_checkpoint(cls, path: str | os.PathLike) -> RunDir:
        """The run folder of a checkpoint file: `<run>/checkpoints/x.pt`, else the file's folder."""
        parent = Path(path).parent
        return cls(parent.parent if parent.name == CHECKPOINTS else parent)

    # --- written by Hydra and the loggers -------------------------------------------------------
    @property
    def hydra(self) -> Path:
        """`.hydra/`: the composed config, Hydra's config and the command-line overrides."""
        return self.root / HYDRA

    @property
    def hydra_config(self) -> Path:
        """`.hydra/config.yaml`: the composed config of the run."""
        return self.hydra / "config.yaml"

    @property
    def hydra_overrides(self) -> Path:
        """`.hydra/overrides.yaml`: the command-line overrides of the run."""
        return self.hydra / "overrides.yaml"

    @property
    def resume_overrides(self) -> Path:
        """`.hydra/resume/overrides.yaml`: the overrides of the run's latest resume."""
        return self.hydra / "resume" / "overrides.yaml"

    def write_record(self, config: Any, overrides: list[str], resume: bool = False) -> None:
        """`.hydra/config.yaml` and `.hydra/overrides.yaml` as Hydra writes them, for a run
        Hydra did not start (from Python, a seed of a batch or trial): `rltrain report` groups
        runs by them. `resume`: the record of a resume in the run's own folder, in
        `.hydra/resume/` (as `rltrain resume=` writes it; `report` merges its overrides)."""
        # start-up: `rltrain list` imports this module, and needs no omegaconf
        from omegaconf import OmegaConf

        folder = self.resume_overrides.parent if resume else self.hydra
        folder.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(OmegaConf.create(config), folder / self.hydra_config.name)
        OmegaConf.save(OmegaConf.create(list(overrides)), folder / self.hydra_overrides.name)

    @property
    def tb(self) -> Path:
        """`tb/`: TensorBoard event files."""
        return self.root / TB

    @property
    def metrics_csv(self) -> Path:
        """`metrics.csv`: every logged scalar, long format."""
        return self.root / METRICS_CSV

    @property
    def wandb(self) -> Path:
        """`wandb/`: wandb files and the run id (logger=wandb)."""
        return self.root / "wandb"

    @property
    def wandb_run_id(self) -> Path:
        """`wandb/run_id`: the wandb run id, so a resumed run continues the same wandb run."""
        return self.wandb / "run_id"

    @property
    def swanlog(self) -> Path:
        """`swanlog/`: SwanLab files (logger=swanlab)."""
        return self.root / "swanlog"

    @property
    def train_log(self) -> Path:
        """`train.log`: the console log."""
        return self.root / "train.log"

    @property
    def learning_curve(self) -> Path:
        """`learning_curve.png`: eval return vs env steps, written at the end of the run."""
        return self.root / "learning_curve.png"

    # --- checkpoints ----------------------------------------------------------------------------
    @property
    def checkpoints(self) -> Path:
        """`checkpoints/`: every checkpoint of the run."""
        return self.root / CHECKPOINTS

    @property
    def latest(self) -> Path:
        """`checkpoints/latest.pt`: written at every eval and checkpoint; what resume reads."""
        return self.checkpoints / LATEST

    @property
    def best(self) -> Path:
        """`checkpoints/best.pt`: the best evaluation so far."""
        return self.checkpoints / BEST

    @property
    def final(self) -> Path:
        """`checkpoints/final.pt`: written once the run completed."""
        return self.checkpoints / FINAL

    def periodic(self, step: int) -> Path:
        """`checkpoints/step_<9 digits>.pt`: the periodic checkpoint at env step `step`."""
        return self.checkpoints / periodic_name(step)

    def periodic_checkpoints(self) -> list[Path]:
        """The periodic checkpoints on disk, oldest first (the zero-padded names sort by step)."""
        return sorted(self.checkpoints.glob(PERIODIC_GLOB))

    # --- eval and export ------------------------------------------------------------------------
    @property
    def eval(self) -> Path:
        """`eval/`: what `rltrain eval` writes."""
        return self.root / "eval"

    @property
    def eval_results(self) -> Path:
        """`eval/results.json`: the last `rltrain eval` result."""
        return self.eval / "results.json"

    @property
    def eval_videos(self) -> Path:
        """`eval/videos/`: episode MP4s of `rltrain eval video=true`."""
        return self.eval / "videos"

    @property
    def export(self) -> Path:
        """`export/`: the policies `rltrain export` writes."""
        return self.root / "export"

    # --- control files --------------------------------------------------------------------------
    @property
    def stop_file(self) -> Path:
        """`STOP`: created by the user to stop a live run gracefully; consumed by the run."""
        return self.root / "STOP"

    @property
    def lock(self) -> Path:
        """`.lock`: held by the live run that owns the folder."""
        return self.root / ".lock"

    # --- several seeds in one folder (rltrain.sweep) --------------------------------------------
    @property
    def seeds_summary(self) -> Path:
        """`seeds.json`: the per-seed results of a several-seed run."""
        return self.root / "seeds.json"

    def seed(self, seed: int) -> RunDir:
        """`seed_<s>/`: the run folder of one seed of a several-seed run."""
        return RunDir(self.root / f"seed_{seed}")

    # --- probes ---------------------------------------------------------------------------------
    def is_hydra_run(self) -> bool:
        """True when the folder holds a `.hydra/` config (a run made by the CLI)."""
        return self.hydra.is_dir()

    def has_checkpoint(self) -> bool:
        """True when `checkpoints/` holds any `.pt` file."""
        return self.checkpoints.is_dir() and any(self.checkpoints.glob("*.pt"))

    def can_resume(self) -> bool:
        """True when a resume of this folder has a `latest.pt` to start from: the run's own, or
        a seed's of the batch this folder holds."""
        return self.latest.is_file() or any(self.seed(s).latest.is_file()
                                            for s in self.seed_folders())

    def seed_folders(self) -> list[int]:
        """The seeds `s` whose `seed_<s>/` folder is here (a several-seed run), in order."""
        if not self.root.is_dir():
            return []
        found = (p.name.removeprefix("seed_") for p in self.root.glob("seed_*") if p.is_dir())
        return sorted(int(s) for s in found if s.lstrip("-").isdigit())


def periodic_name(step: int) -> str:
    """The file name of the periodic checkpoint at env step `step`: `step_<9 digits>.pt`."""
    return f"step_{step:09d}.pt"


def seed_overrides(overrides: list[Any], seed: int) -> list[str]:
    """A batch's or trial's `overrides` as one of its seeds' record: the seed keys replaced by
    `seed=<seed>`."""
    kept = [str(o) for o in overrides
            if str(o).lstrip("+~").partition("=")[0] not in ("seed", "seeds_per_trial", "num_seeds")]
    return [*kept, f"seed={seed}"]


def day_folder(now: datetime | None = None) -> str:
    """The `<YYYY-MM-DD>` folder of Hydra's default `outputs/<date>/<time>`."""
    return (now or datetime.now()).strftime("%Y-%m-%d")


def claim_default_run_dir(now: datetime | None = None) -> Path:
    """Hydra's default `outputs/<YYYY-MM-DD>/<HH-MM-SS>` in the current folder, created here,
    with a `-<k>` suffix when a run started in the same second already has it: `mkdir` claims
    a name atomically, so runs started together (parallel, or one after another within a
    second) never share a folder."""
    now = now or datetime.now()
    base = Path("outputs") / day_folder(now) / now.strftime("%H-%M-%S")
    for k in range(1000):
        candidate = base.with_name(f"{base.name}-{k}") if k else base
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
    raise UserError(f"{base}: 1000 runs started in this second; give hydra.run.dir=<folder>")


def require_writable(folder: Path, why: str) -> None:
    """A one-line `UserError` (`why` first) when `folder`, or the nearest of its parents that
    exists, cannot be written: refused before the work whose result would go there."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{why}, and {path} is not writable")
