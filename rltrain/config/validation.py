"""A composed config, or a checkpoint's plain dict, as a validated `TrainConfig`.

`to_train_config` merges it into the dataclass schemas of `rltrain/config/schema.py` and runs
`validate` (cross-field checks, and the defaults they fill in) on every config it builds, so a
meaningless combination stops the command with one line before anything is built or written.
Single values are checked by `rltrain/checks.py`; each algorithm's own fields by its config's
`validate` method (`rltrain/algos/configs/`).
"""

from __future__ import annotations

import functools
import math

from omegaconf import DictConfig, OmegaConf

from rltrain.algos.configs.base import AlgoConfig, OffPolicyConfig
from rltrain.checks import (
    available_memory,
    check_device,
    check_fraction,
    check_non_negative,
    check_positive,
    check_seed,
)
from rltrain.config.registry import get_algo_spec
from rltrain.config.schema import TrainConfig
from rltrain.envs.config import (
    BACKENDS,
    OFF_POLICY_NUM_ENVS,
    ON_POLICY_NUM_ENVS,
    PREPROCESS_SWITCH,
    AtariConfig,
    EnvConfig,
)
from rltrain.errors import UserError
from rltrain.loggers.config import validate_logger
from rltrain.nets.config import check_net

_PROGRESS = ("auto", "bar", "plain", "off")


def to_train_config(cfg: DictConfig | dict, here: bool | None = None) -> TrainConfig:
    """Convert a composed config (or a checkpoint's plain dict) to a validated `TrainConfig`.

    `here` (see `validate`) defaults to True for a composed config, False for a plain dict.
    """
    if here is None:  # a checkpoint's dict names the device it was trained on, maybe not this one
        here = isinstance(cfg, DictConfig)
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    cfg = dict(cfg)
    algo = dict(cfg.get("algo") or {})
    schema = _schema(str(algo.get("name")))  # an unknown algorithm: its own one line
    try:
        merged = OmegaConf.merge(schema, cfg)
        train_cfg = OmegaConf.to_object(merged)
    except Exception as exc:  # omegaconf's errors are multi-line; keep the first line
        raise UserError(f"invalid config: {str(exc).splitlines()[0]}") from exc
    return validate(train_cfg, here)


@functools.cache
def _schema(algo: str) -> DictConfig:
    """The structured schema of a config training `algo` (built once: ~20 ms; `merge` copies
    it, so the cached one is never changed)."""
    schema = OmegaConf.structured(TrainConfig)
    schema.algo = OmegaConf.structured(get_algo_spec(algo).config)
    return schema


def _as_count(name: str, value: float, allow_zero: bool) -> int:
    if not math.isfinite(value) or value != int(value) or value < 0 or (value == 0 and not allow_zero):
        need = "a non-negative whole number" if allow_zero else "a positive whole number"
        raise UserError(f"{name}={value!r} must be {need}")
    return int(value)


def validate(cfg: TrainConfig, here: bool = True) -> TrainConfig:
    """Check cross-field constraints and normalize step counts to ints; raise `UserError`.

    `here`: also check that `cfg.device` exists on this machine (False for the config a
    checkpoint stores, which names the device it was trained on).
    """
    cfg.total_timesteps = _as_count("total_timesteps", cfg.total_timesteps, allow_zero=False)
    cfg.eval.freq = _as_count("eval.freq", cfg.eval.freq, allow_zero=True)
    cfg.checkpoint.freq = _as_count("checkpoint.freq", cfg.checkpoint.freq, allow_zero=True)
    cfg.logger.log_freq = _as_count("logger.log_freq", cfg.logger.log_freq, allow_zero=True)
    if cfg.env.num_envs is None:
        cfg.env.num_envs = default_num_envs(cfg.algo)
    _check_run(cfg, here)
    _check_env(cfg.env)
    validate_logger(cfg.logger)
    check_non_negative("logger.log_interval", cfg.logger.log_interval)
    check_net(cfg.algo)
    if cfg.algo.net.share_encoder and isinstance(cfg.algo, OffPolicyConfig):
        raise UserError(f"net.share_encoder=true is for PPO and A2C; {cfg.algo.name} trains its "
                        f"actor and critic (or its one Q-network) on separate losses")
    check_algo(cfg.algo)
    validate_algo = getattr(cfg.algo, "validate", None)
    if validate_algo is not None:
        validate_algo(cfg)
    if cfg.num_seeds > 1 and here:  # the values it reads are validated now
        _check_seed_memory(cfg)
    return cfg


def default_num_envs(algo: AlgoConfig) -> int:
    """`env.num_envs` when neither the command line nor a preset set it: one env for an
    off-policy algorithm, so that its `train_freq` / `gradient_steps` count per env step (one
    gradient step per env step by default); 8 for an on-policy one (a varied rollout)."""
    return OFF_POLICY_NUM_ENVS if isinstance(algo, OffPolicyConfig) else ON_POLICY_NUM_ENVS


def _check_seed_batch(cfg: TrainConfig) -> None:
    """What `num_seeds > 1` runs today (rltrain/seed_batch/): every algorithm of
    `catalog.ALGORITHMS` (stacked where its entry names a batched form, else seed by seed);
    the off-policy ones without gSDE."""
    if cfg.seeds_per_trial > 1:
        raise UserError("num_seeds and seeds_per_trial both ask for several seeds: keep one "
                        "(num_seeds=N trains them together, seeds_per_trial=N in turn)")
    if isinstance(cfg.algo, OffPolicyConfig) and getattr(cfg.algo, "use_sde", False):
        raise UserError(f"num_seeds={cfg.num_seeds}: the seed batch does not run gSDE for "
                        f"{cfg.algo.name.upper()} yet; drop algo.use_sde, or use num_seeds=1")
    if cfg.device.startswith("mps"):  # each seed's random stream is a CPU or CUDA generator
        raise UserError(f"num_seeds={cfg.num_seeds}: the seed batch runs on cpu or cuda, not "
                        f"device={cfg.device}; use device=cpu, or seeds_per_trial="
                        f"{cfg.num_seeds} to train the seeds in turn on {cfg.device}")


ENV_BYTES = 4 << 10
"""The least host memory one gymnasium env holds: 4.5 kB (Pendulum-v1) and 5.1 kB (CartPole-v1)
measured with tracemalloc after `reset`; envs of real simulators hold far more."""
RUNNER_BYTES = 2 << 20
"""The least host memory one seed of a `num_seeds` batch holds besides its envs, networks and
buffers (its Runner: modules, loggers, folder records): 2.8 MB a seed measured in all (max
RSS of PPO CartPole-v1 debug=smoke, 32 envs a seed: 397 MB for 32 seeds, 310 MB for one)."""


def seed_bytes(cfg: TrainConfig) -> int:
    """A lower bound on the memory one seed of a `num_seeds` batch takes, from the config alone
    (no env built): `RUNNER_BYTES`, `ENV_BYTES` per env and, on cpu, two float32 networks of
    the hidden widths with one gradient each and the rollout or replay buffer at one float per
    observation (on a GPU those two live in its memory, which is not counted)."""
    host = RUNNER_BYTES + ENV_BYTES * cfg.env.num_envs
    if cfg.device != "cpu":
        return host
    algo, net = cfg.algo, cfg.algo.net
    hidden = net.hidden if net.hidden is not None else algo.hidden_sizes
    widths = [net.actor_hidden if net.actor_hidden is not None else hidden,
              net.critic_hidden if net.critic_hidden is not None else hidden]
    weights = sum(sum(w) + sum(a * b for a, b in zip(w, w[1:], strict=False)) for w in widths)
    if isinstance(algo, OffPolicyConfig):  # obs, next_obs, action, reward; terminated: a byte
        buffer = algo.buffer_size * (4 * 4 + 1)
    else:  # obs, action, reward, value, log-prob, done: a float each
        buffer = getattr(algo, "n_steps", 0) * cfg.env.num_envs * 6 * 4
    return host + 2 * 4 * weights + buffer


def _check_seed_memory(cfg: TrainConfig) -> None:
    """Refuse a `num_seeds` batch that cannot fit in this machine's memory, before anything
    is built: each seed is a whole run (envs, networks, buffers, folder), and `num_seeds=10**9`
    grew until the kernel killed the process."""
    free = available_memory()
    per_seed = seed_bytes(cfg)
    if free is None or per_seed * cfg.num_seeds <= free:
        return
    parts = f"its Runner and {cfg.env.num_envs} env(s)" + (
        ", networks and buffer" if cfg.device == "cpu" else "")
    raise UserError(f"num_seeds={cfg.num_seeds:,}: each seed needs at least {_mib(per_seed)} "
                    f"({parts}), {_mib(per_seed * cfg.num_seeds)} in all, and this machine has "
                    f"{_mib(free)} available: at most num_seeds={free // per_seed:,} fit in it "
                    f"(seeds_per_trial=N trains seeds one after another)")


def _mib(n: int) -> str:
    """`n` bytes in MiB, GiB or TiB, whichever reads best."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / (1 << 20):,.1f} MiB"


def _check_run(cfg: TrainConfig, here: bool) -> None:
    """Run-level fields: seeds, device, threads, evaluation and checkpoint counts, progress."""
    if cfg.seeds_per_trial < 1:
        raise UserError(f"seeds_per_trial={cfg.seeds_per_trial} must be >= 1")
    if cfg.num_seeds < 1:
        raise UserError(f"num_seeds={cfg.num_seeds} must be >= 1")
    if cfg.num_seeds > 1:
        _check_seed_batch(cfg)
    check_seed("seed", cfg.seed, max(cfg.seeds_per_trial, cfg.num_seeds))
    check_device("device", cfg.device, here)
    if cfg.torch_threads < 0:
        raise UserError(f"torch_threads={cfg.torch_threads} must be >= 0 (0 keeps torch's default)")
    for name, value in {"eval.episodes": cfg.eval.episodes, "eval.num_envs": cfg.eval.num_envs}.items():
        if value <= 0:
            raise UserError(f"{name}={value} must be > 0")
    if cfg.eval.seed_offset < 0:
        raise UserError(f"eval.seed_offset={cfg.eval.seed_offset} must be >= 0")
    background = str(cfg.eval.background).strip().lower()
    if background not in ("auto", "true", "false"):
        raise UserError(f"eval.background={cfg.eval.background!r}: choose auto, true or false")
    cfg.eval.background = background
    compile_mode = str(cfg.compile).strip().lower()
    if compile_mode not in ("auto", "true", "false"):
        raise UserError(f"compile={cfg.compile!r}: choose auto, true or false")
    cfg.compile = compile_mode
    if cfg.progress not in _PROGRESS:
        raise UserError(f"progress={cfg.progress!r}: choose one of {', '.join(_PROGRESS)}")
    if cfg.checkpoint.keep_last < 0:
        raise UserError(f"checkpoint.keep_last={cfg.checkpoint.keep_last} must be >= 0")


def _check_env(env: EnvConfig) -> None:
    """The `env` section: counts, time limit, observation clip, backend and vectorization."""
    if env.num_envs <= 0:
        raise UserError(f"env.num_envs={env.num_envs} must be > 0")
    if env.max_episode_steps is not None and env.max_episode_steps <= 0:
        raise UserError(f"env.max_episode_steps={env.max_episode_steps} must be > 0 "
                        f"(null keeps the env's own time limit)")
    check_positive("env.clip_obs", env.clip_obs)
    if type(env.frame_stack) is not int or env.frame_stack < 0:
        raise UserError(f"env.frame_stack={env.frame_stack!r} must be a whole number >= 0")
    if env.vectorization not in ("sync", "async"):
        raise UserError(f"env.vectorization={env.vectorization!r}: choose sync or async")
    if env.backend not in BACKENDS:
        raise UserError(f"env.backend={env.backend!r}: choose {', '.join(BACKENDS)}")
    check_atari(env.atari)


def check_atari(atari: AtariConfig) -> None:
    """The `env.atari` section: its mode and counts."""
    if str(atari.preprocess).strip().lower() not in ("auto", *PREPROCESS_SWITCH):
        raise UserError(f"env.atari.preprocess={atari.preprocess!r}: choose auto, true or false")
    for name, low in (("noop_max", 0), ("frame_skip", 1), ("screen_size", 1), ("frame_stack", 0)):
        value = getattr(atari, name)
        if type(value) is not int or value < low:
            raise UserError(f"env.atari.{name}={value!r} must be a whole number >= {low}")


def check_algo(algo: AlgoConfig) -> None:
    """The fields every algorithm has: discount and learning rate."""
    check_fraction("algo.gamma", algo.gamma)
    check_positive("algo.lr", algo.lr)
