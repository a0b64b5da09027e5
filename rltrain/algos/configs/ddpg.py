"""`DDPGConfig`: DDPG's hyperparameters and their checks (the algorithm: `algos/ddpg.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OffPolicyConfig, check_lrs
from rltrain.checks import check_non_negative


@dataclass
class DDPGConfig(OffPolicyConfig):
    """DDPG hyperparameters (names follow Stable-Baselines3)."""

    name: str = "ddpg"
    lr: float = 1e-3
    """Learning rate of the actor and critic (unless `actor_lr` / `critic_lr` are set)."""
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden layer widths of the actor and the critic (unless `net.*` sets them)."""
    activation: str = "relu"
    """Hidden activation: tanh, relu, elu, gelu or silu (unless `net.activation` is set)."""
    actor_lr: float | None = None
    """Actor learning rate (None: `lr`)."""
    critic_lr: float | None = None
    """Critic learning rate (None: `lr`)."""
    action_noise: float = 0.1
    """Std of the Gaussian exploration noise added to the actor's [-1, 1] action."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks."""
        super().validate(cfg)
        check_lrs(self, ("lr", "actor_lr", "critic_lr"))
        check_non_negative("algo.action_noise", self.action_noise)
