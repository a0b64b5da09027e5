"""The config bases every algorithm's config extends: `AlgoConfig`, the gSDE fields, and the
on-policy and off-policy loop fields (torch-free, like every module of `algos/configs/`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from rltrain.buffers.choice import HER_STRATEGIES, REPLAYS
from rltrain.checks import check_finite, check_fraction, check_non_negative, check_positive
from rltrain.errors import UserError
from rltrain.nets.config import NetConfig


@dataclass
class AlgoConfig:
    """Fields every algorithm has; each algorithm's config (`configs/<name>.py`) adds its own."""

    name: str = MISSING
    """Registry key of the algorithm (`ppo`, `sac`, ...); each algorithm's config sets its own."""
    gamma: float = 0.99
    """Discount factor, in [0, 1]."""
    lr: float = 3e-4
    """Learning rate of the optimizer(s) (> 0)."""
    hidden_sizes: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden layer widths of every MLP the algorithm builds (unless `net.*` sets them)."""
    activation: str = "tanh"
    """Hidden activation: tanh, relu, elu, gelu or silu (unless `net.activation` is set)."""
    net: NetConfig = field(default_factory=NetConfig)
    """Network settings shared by every algorithm; `net.hidden=...` on the command line is
    short for `algo.net.hidden=...` (see the `net.*` section)."""


@dataclass
class SDEConfig:
    """gSDE fields (names as in Stable-Baselines3), shared by PPO, A2C and SAC."""

    use_sde: bool = False
    """Generalized state-dependent exploration (Raffin et al. 2021): the exploration noise is a
    linear function of the policy's features, held for `sde_sample_freq` steps (Box actions)."""
    sde_sample_freq: int = -1
    """gSDE: draw new noise every this many acting steps (-1: once per rollout for PPO/A2C, once
    per `train_freq` steps for SAC)."""
    use_expln: bool = False
    """gSDE: σ grows as log(log σ + 1) + 1 above log σ = 0 instead of exponentially (SB3's
    `use_expln`), which keeps the noise from exploding."""

    def validate_sde(self) -> None:
        """`sde_sample_freq` is -1 or a positive count."""
        if self.sde_sample_freq == 0 or self.sde_sample_freq < -1:
            raise UserError(f"algo.sde_sample_freq={self.sde_sample_freq} must be -1 (once per "
                            "rollout) or a positive number of steps")


@dataclass
class OnPolicyConfig(SDEConfig, AlgoConfig):
    """Fields of the on-policy loop and actor-critic shared by PPO and A2C."""

    n_steps: int = 2048
    """Steps per env per rollout; the batch is n_steps * env.num_envs."""
    gae_lambda: float = 0.95
    """GAE λ (1.0 gives Monte-Carlo advantages, 0.0 one-step TD)."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (Box actions)."""
    log_std_min: float = -20.0
    """Lower clamp of the Gaussian policy's log standard deviation (Box actions)."""
    log_std_max: float = 2.0
    """Upper clamp of the Gaussian policy's log standard deviation (Box actions)."""
    ortho_init: bool = True
    """Orthogonal initialization of the networks (`net.ortho_init`, when set, wins)."""

    def validate(self, cfg: Any) -> None:
        """Checks shared by the on-policy algorithms."""
        self.validate_sde()
        if self.n_steps <= 0:
            raise UserError(f"algo.n_steps={self.n_steps} must be > 0")
        check_fraction("algo.gae_lambda", self.gae_lambda)
        for name in ("log_std_init", "log_std_min", "log_std_max"):
            check_finite(f"algo.{name}", getattr(self, name))
        if self.log_std_min >= self.log_std_max:
            raise UserError(f"algo.log_std_min={self.log_std_min} must be < "
                            f"algo.log_std_max={self.log_std_max}")


@dataclass
class OffPolicyConfig(AlgoConfig):
    """Fields of the off-policy loop shared by DQN, DDPG, TD3 and SAC."""

    buffer_size: int = 1_000_000
    """Replay capacity in transitions (preallocated on the training device)."""
    learning_starts: int = 100
    """Env steps of uniform random actions before learning starts."""
    batch_size: int = 256
    """Transitions per gradient step."""
    train_freq: int = 1
    """Train every this many vector-env steps."""
    gradient_steps: int = 1
    """Gradient steps each time training happens."""
    tau: float = 0.005
    """Polyak coefficient of the target networks (1.0 = hard copy)."""
    lr_decay_steps: float = 0
    """Env steps over which the learning rate decays linearly from `lr` to `lr_final` (0: a
    constant rate). RL-Zoo's `lin_<lr>` is `lr_decay_steps=${total_timesteps}` (to 0 over the
    whole run, whatever its length). Separate actor, critic and α rates decay by the same
    factor as `lr`."""
    lr_final: float = 0.0
    """Learning rate reached after `lr_decay_steps` env steps, and kept after them."""
    replay: str = "auto"
    """The replay transitions are stored in (`rltrain/buffers/choice.py` `REPLAYS`): `uniform`
    (a ring sampled uniformly), `frames` (frame-stacked pixels, each frame stored once), `her`
    (hindsight experience replay for goal envs: Dict observations with `achieved_goal` and
    `desired_goal`, and the env's `compute_reward`), or `auto`: `frames` for frame-stacked
    pixel envs, `uniform` otherwise."""
    her_n_sampled_goal: int = 4
    """`algo.replay=her`: relabelled transitions per real one; a fraction n / (n + 1) of each
    minibatch gets a new goal (SB3's `n_sampled_goal`)."""
    her_goal_selection_strategy: str = "future"
    """`algo.replay=her`: where a new goal comes from: `future` (the achieved goal of this or a
    later step of the same episode), `final` (its last step) or `episode` (any of its steps)."""

    def replay_path(self, name: str) -> str:
        """`module:Class` of the replay called `name` (`replay`, `auto` resolved): the entry of
        `REPLAYS`; an algorithm with a replay of its own overrides this."""
        return REPLAYS[name]

    def validate(self, cfg: Any) -> None:
        """Cross-field checks shared by the off-policy algorithms."""
        if self.replay != "auto" and self.replay not in REPLAYS:
            raise UserError(f"algo.replay={self.replay!r} is not a replay: choose auto, "
                            f"{', '.join(REPLAYS)}")
        if self.her_goal_selection_strategy not in HER_STRATEGIES:
            raise UserError(f"algo.her_goal_selection_strategy={self.her_goal_selection_strategy!r}"
                            f": choose {', '.join(HER_STRATEGIES)}")
        if self.her_n_sampled_goal < 0:
            raise UserError(f"algo.her_n_sampled_goal={self.her_n_sampled_goal} must be >= 0")
        if self.replay == "her":
            check_her(cfg)
        for name in ("buffer_size", "batch_size", "train_freq", "gradient_steps"):
            if getattr(self, name) <= 0:
                raise UserError(f"algo.{name}={getattr(self, name)} must be > 0")
        if self.learning_starts < 0:
            raise UserError(f"algo.learning_starts={self.learning_starts} must be >= 0")
        for name in ("lr_decay_steps", "lr_final"):
            check_non_negative(f"algo.{name}", getattr(self, name))
        check_fraction("algo.tau", self.tau, zero=False)


def check_her(cfg: Any) -> None:
    """Refuse, in one line, what `algo.replay=her` cannot relabel: normalized observations or
    rewards (`compute_reward` takes the env's own goals and gives its own rewards) and seed
    batches (one replay per seed of a shared env is not built)."""
    env = getattr(cfg, "env", None)
    for name in ("normalize_obs", "normalize_reward"):
        if getattr(env, name, False):
            raise UserError(f"algo.replay=her recomputes rewards from the stored goals with the "
                            f"env's compute_reward: set env.{name}=false")
    if getattr(cfg, "num_seeds", 1) > 1:
        raise UserError("algo.replay=her trains one seed at a time: use num_seeds=1 (or a "
                        "sweep over seed)")


def check_lrs(cfg: Any, names: tuple[str, ...]) -> None:
    """Raise `UserError` unless every learning rate named (when set) is a finite number > 0."""
    for name in names:
        check_positive(f"algo.{name}", getattr(cfg, name))


def check_minibatches(algo: Any, cfg: Any) -> None:
    """`algo.batch_size` and `algo.n_epochs` > 0, and the minibatches tile the rollout of
    `algo.n_steps` x `env.num_envs` exactly (PPO's and PQN's epochs)."""
    batch = algo.n_steps * cfg.env.num_envs
    if algo.batch_size <= 0 or algo.n_epochs <= 0:
        raise UserError("algo.batch_size and algo.n_epochs must be > 0")
    if batch % algo.batch_size != 0:
        raise UserError(
            f"algo.batch_size={algo.batch_size} does not divide the rollout batch "
            f"algo.n_steps * env.num_envs = {batch}; pick a divisor of {batch}")
