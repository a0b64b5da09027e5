"""`A2CConfig`: A2C's hyperparameters and their checks (the algorithm: `algos/a2c.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.base import OnPolicyConfig
from rltrain.checks import check_fraction, check_non_negative
from rltrain.errors import UserError

OPTIMIZERS = ("rmsprop", "adam")


@dataclass
class A2CConfig(OnPolicyConfig):
    """A2C hyperparameters (names and defaults follow Stable-Baselines3)."""

    name: str = "a2c"
    lr: float = 7e-4
    """Learning rate of the optimizer."""
    n_steps: int = 5
    """Steps per env per rollout; the batch is n_steps * env.num_envs."""
    gae_lambda: float = 1.0
    """GAE λ; 1.0 gives the classic n-step advantage, < 1 blends in shorter returns."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (0 disables)."""
    normalize_advantage: bool = False
    """Normalize advantages over the rollout batch."""
    optimizer: str = "rmsprop"
    """Optimizer: rmsprop (as in the A3C paper and SB3) or adam."""
    optimizer_eps: float = 1e-5
    """Epsilon of the optimizer's denominator."""
    rmsprop_alpha: float = 0.99
    """Smoothing constant of RMSprop's squared-gradient average (ignored by adam)."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks against the run config."""
        if self.optimizer not in OPTIMIZERS:
            raise UserError(
                f"algo.optimizer={self.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        super().validate(cfg)
        check_fraction("algo.rmsprop_alpha", self.rmsprop_alpha)
        for name in ("ent_coef", "vf_coef", "max_grad_norm", "optimizer_eps"):
            check_non_negative(f"algo.{name}", getattr(self, name))
