"""`ARSConfig`: ARS's hyperparameters and their checks (the algorithm: `algos/ars.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OnPolicyConfig
from rltrain.checks import check_finite, check_positive
from rltrain.errors import UserError


@dataclass
class ARSConfig(OnPolicyConfig):
    """Augmented Random Search (Mania et al. 2018), as SB3-contrib's `ARS`: names and defaults
    are its own (`learning_rate` is `lr` here, as for every algorithm). No gradients, no critic:
    each generation scores 2 x `n_delta` perturbed copies of the policy by whole episodes and
    steps along the best directions. `gamma`, `gae_lambda` and `log_std_*` are not used."""

    name: str = "ars"
    lr: float = 0.02
    """Step size α of θ ← θ + α / (n_top · σ_R) · Σ (r+ − r−) δ (SB3-contrib's `learning_rate`;
    `anneal_lr` decays it linearly to 0 over the run)."""
    hidden_sizes: list[int] = field(default_factory=list)
    """Hidden widths of the policy (unless `net.hidden` sets them). [] is SB3-contrib's
    `LinearPolicy` (one Linear layer, no bias, Box outputs clipped to [-1, 1]); widths give its
    `MlpPolicy` (biases, `activation` between layers, tanh on Box outputs)."""
    activation: str = "relu"
    """Hidden activation of an MLP policy (SB3-contrib's `MlpPolicy` uses ReLU)."""
    ortho_init: bool = False
    """Orthogonal initialization of an MLP policy (false: PyTorch's default, as SB3-contrib's);
    it only matters with `zero_policy=false`."""
    n_steps: int = 1
    """Vector steps per rollout: 1, so that a generation's step is taken the moment its last
    episode ends, as in SB3-contrib (any other value is refused)."""
    n_delta: int = 8
    """Random directions δ per generation; each is tried as θ + σδ and θ − σδ."""
    n_top: int | None = None
    """Directions kept for the step: those with the largest max(r+, r−) (null: all `n_delta`)."""
    delta_std: float = 0.05
    """σ, the scale of the perturbations θ ± σδ (δ ~ N(0, I))."""
    zero_policy: bool = True
    """Start from θ = 0 (SB3-contrib's default); false keeps the network's initialization."""
    alive_bonus_offset: float = 0.0
    """Added to every reward when a candidate is scored (its return + offset x its episode
    lengths): a negative value cancels an env's per-step alive bonus (Hopper: -1). The logged
    episode returns stay the env's."""
    n_eval_episodes: int = 1
    """Episodes per candidate; its score is the sum of their returns."""

    @property
    def episodes_per_generation(self) -> int:
        """2 x `n_delta` candidates x `n_eval_episodes` episodes."""
        return 2 * self.n_delta * self.n_eval_episodes

    @property
    def top(self) -> int:
        """The number of directions each step keeps (`n_top`, or `n_delta` when unset)."""
        return self.n_delta if self.n_top is None else self.n_top

    def validate(self, cfg: Any) -> None:
        """The on-policy checks, then ARS's own."""
        super().validate(cfg)
        if self.n_steps != 1:
            raise UserError(f"algo.n_steps={self.n_steps}: ARS steps its policy the moment a "
                            f"generation's last episode ends, so its rollouts are one vector "
                            f"step; drop algo.n_steps (1)")
        for name in ("n_delta", "n_eval_episodes"):
            if getattr(self, name) <= 0:
                raise UserError(f"algo.{name}={getattr(self, name)} must be > 0")
        if not 1 <= self.top <= self.n_delta:
            raise UserError(f"algo.n_top={self.n_top} must be in [1, algo.n_delta={self.n_delta}]"
                            f" (the directions a step keeps, of those tried)")
        check_positive("algo.delta_std", self.delta_std)
        check_finite("algo.alive_bonus_offset", self.alive_bonus_offset)
        self._validate_nets()
        env = cfg.env
        if env.normalize_reward:
            raise UserError("env.normalize_reward=true: ARS scores each candidate by the returns "
                            "of its episodes, which scaled rewards would change; drop "
                            "env.normalize_reward (alive_bonus_offset corrects an alive bonus)")
        if env.num_envs > self.episodes_per_generation:
            raise UserError(
                f"env.num_envs={env.num_envs} is more than the {self.episodes_per_generation} "
                f"episodes of a generation (2 x algo.n_delta x algo.n_eval_episodes): "
                f"{env.num_envs - self.episodes_per_generation} envs would only ever run the "
                f"unperturbed policy; use env.num_envs={self.episodes_per_generation} or fewer")

    def _validate_nets(self) -> None:
        """What ARS's one network refuses."""
        if self.use_sde:
            raise UserError("algo.use_sde=true: ARS explores by perturbing its weights, not its "
                            "actions; drop algo.use_sde")
        if self.net.critic_hidden is not None:
            raise UserError("net.critic_hidden: ars has no value network; set net.hidden (or "
                            "algo.hidden_sizes) for its policy")
        if self.net.share_encoder:
            raise UserError("net.share_encoder: ars has one network (its policy); drop "
                            "net.share_encoder")
