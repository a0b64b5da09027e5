"""Where metrics go: the `logger` section of the config (schemas and the check of its modes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rltrain.errors import UserError

_WANDB_MODES = (None, "online", "offline", "disabled")
_SWANLAB_MODES = ("offline", "local", "online", "disabled")


@dataclass
class WandbConfig:
    """Weights & Biases (`logger=wandb`); needs `pip install "rltrain[wandb]"`."""

    enabled: bool = False
    """Send metrics and the composed config to wandb; files go under `<run>/wandb/`."""
    project: str = "rltrain"
    """wandb project."""
    entity: str | None = None
    """wandb team or user (None: your default entity)."""
    group: str | None = None
    """Group runs in the wandb UI (e.g. one group per sweep)."""
    tags: list[str] = field(default_factory=list)
    """Tags of the wandb run."""
    name: str | None = None
    """Run name (None: the last two parts of the run dir, e.g. `2024-05-01/12-00-00`)."""
    mode: str | None = None
    """online, offline or disabled; None lets `WANDB_MODE` decide (online when unset)."""


@dataclass
class SwanlabConfig:
    """SwanLab (`logger=swanlab`); needs `pip install "rltrain[swanlab]"`."""

    enabled: bool = False
    """Send metrics and the composed config to SwanLab; files go under `<run>/swanlog/`."""
    project: str = "rltrain"
    """SwanLab project."""
    workspace: str | None = None
    """SwanLab workspace (None: your own)."""
    group: str | None = None
    """Group of the experiment."""
    tags: list[str] = field(default_factory=list)
    """Tags of the experiment."""
    name: str | None = None
    """Experiment name (None: the last two parts of the run dir)."""
    mode: str = "offline"
    """offline (files only; `swanlab sync` uploads later), online, local (needs
    `swanlab[dashboard]`) or disabled."""


@dataclass
class LoggerConfig:
    """Where metrics go. Console output is always on, and so is `<run>/metrics.csv` unless
    `csv=false`. Each `logger=` option switches one backend on; `logger=[tensorboard,wandb]`
    combines them."""

    tensorboard: bool = False
    """Write TensorBoard event files under `<run>/tb/` (on with `logger=tensorboard`, the default)."""
    csv: bool = True
    """Write every logged scalar to `<run>/metrics.csv` (long format: step,time,name,value)."""
    wandb: WandbConfig = field(default_factory=WandbConfig)
    swanlab: SwanlabConfig = field(default_factory=SwanlabConfig)
    log_interval: float = 5.0
    """Seconds between plain progress lines when stdout is not a terminal."""
    log_freq: float = 1000
    """Write training metrics once per this many env steps (0: after every update)."""
    log_norm_stats: bool = False
    """Also log the normalizers' statistics: `norm/obs_mean/<i>`, `norm/obs_std/<i>` per
    observation dimension, `norm/reward_std` (the reward divisor) and their sample counts."""
    extra_log_keys: list[str] = field(default_factory=list)
    """Top-level keys of the env's step `info` to log as `extra/<key>` (numeric scalars only)."""


def validate_logger(cfg: LoggerConfig) -> None:
    """Modes of the service loggers (checked here so a typo fails before the run starts)."""
    if cfg.wandb.mode not in _WANDB_MODES:
        raise UserError(f"logger.wandb.mode={cfg.wandb.mode!r}: choose online, offline, disabled "
                        f"or null (then WANDB_MODE decides)")
    if cfg.swanlab.mode not in _SWANLAB_MODES:
        raise UserError(f"logger.swanlab.mode={cfg.swanlab.mode!r}: choose one of "
                        f"{', '.join(_SWANLAB_MODES)}")
