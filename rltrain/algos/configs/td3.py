"""`TD3Config`: TD3's hyperparameters and their checks (the algorithm: `algos/td3.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OffPolicyConfig, check_lrs
from rltrain.checks import check_non_negative
from rltrain.errors import UserError


@dataclass
class TD3Config(OffPolicyConfig):
    """TD3 hyperparameters (names follow Stable-Baselines3)."""

    name: str = "td3"
    lr: float = 1e-3
    """Learning rate of the actor and critics (unless `actor_lr` / `critic_lr` are set)."""
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden layer widths of the actor and each critic (unless `net.*` sets them)."""
    activation: str = "relu"
    """Hidden activation: tanh, relu, elu, gelu or silu (unless `net.activation` is set)."""
    actor_lr: float | None = None
    """Actor learning rate (None: `lr`)."""
    critic_lr: float | None = None
    """Critic learning rate (None: `lr`)."""
    action_noise: float = 0.1
    """Std of the Gaussian exploration noise added to the actor's [-1, 1] action."""
    policy_delay: int = 2
    """Update the actor and the targets once per this many critic updates."""
    target_noise: float = 0.2
    """Std of the target policy smoothing noise (in [-1, 1] action units)."""
    target_noise_clip: float = 0.5
    """Clip the target policy smoothing noise to ± this."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks."""
        super().validate(cfg)
        check_lrs(self, ("lr", "actor_lr", "critic_lr"))
        if self.policy_delay < 1:
            raise UserError(f"algo.policy_delay={self.policy_delay} must be >= 1")
        for name in ("action_noise", "target_noise", "target_noise_clip"):
            check_non_negative(f"algo.{name}", getattr(self, name))
