"""`TRPOConfig`: TRPO's hyperparameters and their checks (the algorithm: `algos/trpo.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.base import OnPolicyConfig
from rltrain.checks import check_fraction, check_non_negative, check_positive
from rltrain.errors import UserError


@dataclass
class TRPOConfig(OnPolicyConfig):
    """TRPO hyperparameters (names and defaults follow SB3-contrib's `TRPO`)."""

    name: str = "trpo"
    lr: float = 1e-3
    """Learning rate of the value function's Adam (the policy takes natural-gradient steps)."""
    batch_size: int = 128
    """Minibatch size of the value-function steps."""
    n_critic_updates: int = 10
    """Passes of value-function minibatch steps over the rollout per update."""
    target_kl: float = 0.01
    """The trust region: the largest mean KL(old ‖ new) a policy step may reach."""
    cg_max_steps: int = 15
    """Conjugate-gradient iterations solving (F + damping·I) s = g for the step direction."""
    cg_damping: float = 0.1
    """Damping added to the Fisher-vector product (keeps the solve well conditioned)."""
    line_search_shrinking_factor: float = 0.8
    """Each backtracking try scales the step by this factor."""
    line_search_max_iter: int = 10
    """Backtracking tries before the step is rejected and the old policy kept."""
    sub_sampling_factor: int = 1
    """Use every k-th rollout row for the policy step (the Fisher and the line search), for speed."""
    normalize_advantage: bool = True
    """Normalize advantages over the rollout (the rows the policy step uses)."""
    adam_eps: float = 1e-5
    """Epsilon of the value function's Adam (SB3's ActorCriticPolicy optimizer)."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks against the run config."""
        super().validate(cfg)
        if self.net.share_encoder:
            raise UserError("net.share_encoder=true: TRPO steps the policy alone in its trust "
                            "region and trains the critic apart, so they share no encoder; drop "
                            "net.share_encoder for trpo")
        for name in ("batch_size", "n_critic_updates", "cg_max_steps", "line_search_max_iter",
                     "sub_sampling_factor"):
            if getattr(self, name) <= 0:
                raise UserError(f"algo.{name}={getattr(self, name)} must be > 0")
        check_positive("algo.target_kl", self.target_kl)
        check_fraction("algo.line_search_shrinking_factor", self.line_search_shrinking_factor,
                       zero=False)
        for name in ("cg_damping", "adam_eps"):
            check_non_negative(f"algo.{name}", getattr(self, name))
        rows = self.n_steps * cfg.env.num_envs
        if self.normalize_advantage and -(-rows // self.sub_sampling_factor) < 2:
            raise UserError(f"algo.normalize_advantage needs 2 or more rows for the policy step; "
                            f"algo.n_steps * env.num_envs = {rows} with "
                            f"algo.sub_sampling_factor={self.sub_sampling_factor} gives fewer")
