"""`SACConfig`: SAC's hyperparameters and their checks (the algorithm: `algos/sac.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OffPolicyConfig, SDEConfig, check_lrs
from rltrain.checks import check_finite, check_positive
from rltrain.errors import UserError


@dataclass
class SACConfig(SDEConfig, OffPolicyConfig):
    """SAC hyperparameters (names follow Stable-Baselines3 where it has one)."""

    name: str = "sac"
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden layer widths of the actor and each critic (unless `net.*` sets them)."""
    activation: str = "relu"
    """Hidden activation: tanh, relu, elu, gelu or silu (unless `net.activation` is set)."""
    actor_lr: float | None = None
    """Actor learning rate (None: `lr`)."""
    critic_lr: float | None = None
    """Critic learning rate (None: `lr`)."""
    alpha: float = 1.0
    """Entropy temperature α: its initial value with `autotune_alpha`, else its fixed value."""
    autotune_alpha: bool = True
    """Learn α so that the policy's entropy tracks `target_entropy`."""
    alpha_lr: float | None = None
    """Learning rate of log α (None: `lr`)."""
    target_entropy: float | None = None
    """Entropy target of the α tuning (None: −action_dim)."""
    policy_delay: int = 1
    """Update the actor (and α) once per this many critic updates."""
    log_std_min: float = -20.0
    """Lower clamp of the actor's pre-tanh log standard deviation."""
    log_std_max: float = 2.0
    """Upper clamp of the actor's pre-tanh log standard deviation."""
    log_std_init: float = -3.0
    """gSDE only: initial log σ of the noise matrix (SB3's SAC default)."""
    squash_eps: float = 0.0
    """ε in the actor's tanh correction log(1 − tanh(u)² + ε): 0 computes it exactly (SBX's
    and CleanRL's form; the penalty on a saturated action grows without bound), SB3's 1e-6
    caps it at log(1e-6) per dimension, so the entropy term stops pulling saturated actions
    back (>= 0)."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks."""
        super().validate(cfg)
        self.validate_sde()
        check_lrs(self, ("lr", "actor_lr", "critic_lr", "alpha_lr"))
        check_positive("algo.alpha", self.alpha)
        for name in ("target_entropy", "log_std_min", "log_std_max", "log_std_init",
                     "squash_eps"):
            check_finite(f"algo.{name}", getattr(self, name))
        if self.squash_eps < 0:
            raise UserError(f"algo.squash_eps={self.squash_eps} must be >= 0 (0: the exact "
                            f"tanh correction; SB3 uses 1e-6)")
        if self.policy_delay < 1:
            raise UserError(f"algo.policy_delay={self.policy_delay} must be >= 1")
        if self.log_std_min >= self.log_std_max:
            raise UserError(f"algo.log_std_min={self.log_std_min} must be < "
                            f"algo.log_std_max={self.log_std_max}")
