"""Run-level configuration: the dataclass schemas and their conversion.

The dataclasses are the single source of truth for fields, types and defaults; the YAML files
under `conf/` hold values only. `to_train_config` turns a composed DictConfig (or the plain dict
stored in a checkpoint) into a validated `TrainConfig` (`rltrain/config/validation.py`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from rltrain.algos.configs.base import AlgoConfig, OffPolicyConfig  # noqa: F401  (moved; re-exported)
from rltrain.checks import check_device, check_seed
from rltrain.envs.aliases import ENV_ALIASES  # noqa: F401  (re-exported)

# the env schemas live with the envs (which import nothing from config); importable from here
from rltrain.envs.config import AtariConfig, EnvConfig, WrapperConfig  # noqa: F401
from rltrain.errors import UserError

# the logger schemas live with the loggers; importable from here like every other section
from rltrain.loggers.config import (  # noqa: F401
    LoggerConfig,
    SwanlabConfig,
    WandbConfig,
)


@dataclass
class EvalConfig:
    """Periodic deterministic evaluation during training."""

    freq: float = 10_000
    """Evaluate every this many env steps (0 disables periodic evaluation; a final one still runs)."""
    episodes: int = 10
    """Episodes per evaluation."""
    deterministic: bool = True
    """Use the policy's deterministic action (mean / argmax)."""
    num_envs: int = 5
    """Parallel environments used by evaluation."""
    seed_offset: int = 10_000
    """Evaluation envs are seeded with `seed + seed_offset`, apart from the training envs'
    `seed + i` (>= 0)."""
    background: str = "auto"
    """Periodic evaluations in a second process while training goes on: `auto` (where a core is
    spare and the run has at least 50,000 env steps), `true` or `false`. The final evaluation
    always runs in the training process; a seed batch and a torchrun job evaluate in it."""

@dataclass
class CheckpointConfig:
    """When checkpoints are written and how many periodic ones are kept."""

    freq: float = 50_000
    """Write a periodic checkpoint every this many env steps (0 disables periodic ones)."""
    keep_last: int = 3
    """Periodic checkpoints kept on disk; `latest.pt`, `best.pt` and `final.pt` are always kept."""
    save_buffer: bool = False
    """Off-policy: save the replay buffer in checkpoints so a resume is bit-for-bit (large files)."""

@dataclass
class TrainConfig:
    """A whole training run."""

    algo: AlgoConfig = MISSING
    env: EnvConfig = field(default_factory=EnvConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    seed: int = 0
    """Seed for torch, numpy, python and the environments, in [0, 2**32 - 1] (numpy's range)."""
    device: str = "cpu"
    """Training device: cpu, cuda, cuda:N, mps, or auto (cuda when available); it must exist
    on this machine."""
    total_timesteps: float = 100_000
    """Env steps to train for (summed over parallel envs); `5e4` notation is accepted. Every env
    steps together, so a run takes ceil(total_timesteps / env.num_envs) * env.num_envs steps;
    on-policy algorithms shorten their last rollout to fit."""
    torch_threads: int = 1
    """torch intra-op threads (0 keeps torch's default). Small MLPs run fastest with 1."""
    flush_denormal: bool = True
    """Flush denormal floats (below ~1.2e-38) to zero on the CPU while training, as JAX does.
    Adam's moments of near-zero gradients otherwise fall into denormals, which the CPU computes
    ~10x slower: DQN's Adam step on CartPole took 0.65 ms instead of ~0.06 ms. Applies to the
    training thread (all of torch's work with `torch_threads=1`)."""
    compile: str = "auto"
    """Each gradient step as one compiled graph (torch.compile; SAC, TQC, TD3, DDPG, DQN and
    QR-DQN): `auto` (where the run plans enough gradient steps to pay the first compile back:
    10k for TQC, 25k QR-DQN, 50k SAC and DDPG, 100k TD3 and DQN), `true` or `false`. Results
    match the eager update within float rounding."""
    compile_cache: str | None = None
    """Folder where compiled updates are kept for later runs of the same shapes (default:
    `$TORCHINDUCTOR_CACHE_DIR`, else `~/.cache/rltrain/inductor`)."""
    seeds_per_trial: int = 1
    """Seeds one job trains in turn (`seed`, `seed+1`, ...; each in `<run>/seed_<s>/`); the job
    returns their mean final eval, so a sweeper's trial is not decided by one lucky seed."""
    num_seeds: int = 1
    """Seeds trained together in this one process as a batch (`seed`, `seed+1`, ...; each a
    complete run in `<run>/seed_<s>/`): one batched network call serves them all, each keeps its
    own env, optimizer, random stream and checkpoints. The six algorithms with MLP networks on
    vector observations; PPO and A2C networks that cannot be stacked (recurrent, gSDE, images)
    run seed by seed inside the batch."""
    progress: str = "auto"
    """Console progress: auto (bar on a terminal, plain lines otherwise), bar, plain or off."""
    resume: str | None = None
    """Continue a run: its directory or a checkpoint file; `auto` resumes this run dir if it has one."""
    preset: str | None = None
    """Name of the tuned preset applied from `conf/tuned/` (informational; set by the preset)."""

@dataclass
class EvalRunConfig:
    """`rltrain eval`: evaluate a saved checkpoint."""

    ckpt: str = MISSING
    """Checkpoint file, or a run directory (then `checkpoints/latest.pt` is used)."""
    episodes: int = 10
    """Number of evaluation episodes."""
    deterministic: bool = True
    """Use the policy's deterministic action."""
    seed: int = 1000
    """Seed of the evaluation environments, in [0, 2**32 - 1]."""
    device: str = "cpu"
    """Device to run the policy on: cpu, cuda, cuda:N, mps or auto."""
    num_envs: int = 5
    """Parallel evaluation environments."""
    video: bool = False
    """Write an MP4 of each recorded episode to `<run>/eval/videos/` (needs `pip install
    "rltrain[video]"`)."""
    video_episodes: int | None = 3
    """With `video=true`: how many of the evaluated episodes to record (null: all of them)."""

    def validate(self) -> EvalRunConfig:
        """Raise a one-line `UserError` for a value `rltrain eval` (or `evaluate()`) cannot use."""
        _check_ints(self, ("episodes", "num_envs", "seed"))
        for name in ("episodes", "num_envs"):
            if getattr(self, name) <= 0:
                raise UserError(f"{name}={getattr(self, name)} must be > 0")
        if self.video_episodes is not None and self.video_episodes <= 0:
            raise UserError(f"video_episodes={self.video_episodes} must be > 0 (or null: record "
                            f"every evaluated episode)")
        check_seed("seed", self.seed)
        check_device("device", self.device)
        return self


@dataclass
class ExportConfig:
    """`rltrain export`: write the deterministic policy as ONNX or TorchScript, then check it."""

    ckpt: str = MISSING
    """Checkpoint file, or a run directory (then `checkpoints/latest.pt` is used)."""
    format: str = "onnx"
    """`onnx` (needs `pip install "rltrain[export]"`) or `torchscript`."""
    out: str | None = None
    """Output file (null: `<run>/export/policy.onnx` or `<run>/export/policy.pt`)."""
    check_samples: int = 1000
    """Random observations on which the export must give the torch policy's actions."""
    seed: int = 0
    """Seed of those random observations, in [0, 2**32 - 1]."""

    def validate(self) -> ExportConfig:
        """Raise a one-line `UserError` for a value `rltrain export` cannot use."""
        # start-up: torch, which export's formats import; only `rltrain export` validates this config
        from rltrain.export.formats import FORMATS

        if self.format not in FORMATS:
            raise UserError(f"format={self.format!r}: choose one of {', '.join(FORMATS)}")
        _check_ints(self, ("check_samples", "seed"))
        if self.check_samples <= 0:
            raise UserError(f"check_samples={self.check_samples} must be > 0")
        check_seed("seed", self.seed)
        return self


def _check_ints(cfg: Any, names: tuple[str, ...]) -> None:
    """One-line `UserError` for a field that is not an int (a Python caller's `seed=None`)."""
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise UserError(f"{name}={value!r} must be an integer")


def to_command_config(cfg: DictConfig) -> Any:
    """The validated dataclass (`EvalRunConfig`, `ExportConfig`) of a composed command config."""
    return OmegaConf.to_object(cfg).validate()  # type: ignore[union-attr]


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """A plain dict of the config: what checkpoints store. `dataclasses.asdict` (0.2 ms; it was
    OmegaConf's structured round trip, 27 ms): a validated `TrainConfig` holds plain values only,
    no interpolation (tests/test_config.py checks both give the same dict for every preset)."""
    return dataclasses.asdict(cfg)


def replace(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    """A copy of `cfg` with top-level fields changed."""
    return dataclasses.replace(cfg, **changes)
