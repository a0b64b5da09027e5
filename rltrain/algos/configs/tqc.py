"""`TQCConfig`: TQC's hyperparameters and their checks (the algorithm: `algos/tqc.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.sac import SACConfig
from rltrain.errors import UserError


@dataclass
class TQCConfig(SACConfig):
    """TQC hyperparameters: SAC's (SB3-contrib's TQC defaults are SB3's SAC defaults) and the
    quantile critics' (names follow SB3-contrib)."""

    name: str = "tqc"
    n_critics: int = 2
    """Critics in the ensemble (SB3-contrib's `policy_kwargs` `n_critics`)."""
    n_quantiles: int = 25
    """Quantiles each critic outputs per (s, a) (SB3-contrib's `policy_kwargs` `n_quantiles`)."""
    top_quantiles_to_drop_per_net: int = 2
    """The target drops the n_critics × this largest of the critics' pooled n_critics ×
    n_quantiles target quantiles (0: no truncation)."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks: SAC's, and a target keeps at least one quantile."""
        super().validate(cfg)
        if self.n_critics < 1:
            raise UserError(f"algo.n_critics={self.n_critics} must be >= 1")
        if self.n_quantiles < 2:
            raise UserError(f"algo.n_quantiles={self.n_quantiles} must be >= 2 (one quantile "
                            f"is a plain critic: algo=sac)")
        if not 0 <= self.top_quantiles_to_drop_per_net < self.n_quantiles:
            raise UserError(f"algo.top_quantiles_to_drop_per_net="
                            f"{self.top_quantiles_to_drop_per_net} must be >= 0 and < "
                            f"algo.n_quantiles={self.n_quantiles} (the target keeps a quantile)")
