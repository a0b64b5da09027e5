"""`QRDQNConfig`: QR-DQN's hyperparameters and their checks (the algorithm: `algos/qrdqn.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.dqn import DQNConfig
from rltrain.errors import UserError


@dataclass
class QRDQNConfig(DQNConfig):
    """QR-DQN hyperparameters (Dabney et al. 2017; names follow SB3-contrib's `QRDQN`): DQN's
    fields and defaults (for a small task without a preset: SB3-contrib's own defaults are
    Atari's, lr 5e-5, batch 32, target copy every 1e4 steps), plus `n_quantiles`. Adam's ε is
    0.01 / batch_size, as SB3-contrib sets it. RL-Zoo's tuned values live in
    `conf/tuned/qrdqn_<env>.yaml`. `dueling` is refused (SB3-contrib's QR-DQN has no dueling
    head)."""

    name: str = "qrdqn"
    n_quantiles: int = 50
    """Quantiles of the return's distribution per action (the Q-network's outputs per action,
    at τ̂_i = (2i + 1) / 2N); Q(s, a) is their mean."""

    def validate(self, cfg: Any) -> None:
        """DQN's checks, then QR-DQN's own."""
        super().validate(cfg)
        if self.n_quantiles <= 0:
            raise UserError(f"algo.n_quantiles={self.n_quantiles} must be > 0")
        if self.dueling:
            raise UserError("algo.dueling=true: qrdqn has no dueling head; use algo=dqn for one")
