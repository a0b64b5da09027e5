"""`CrossQConfig`: CrossQ's hyperparameters and their checks (the algorithm: `algos/crossq.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.sac import SACConfig
from rltrain.checks import check_fraction
from rltrain.errors import UserError
from rltrain.nets.config import MAX_WIDTH


@dataclass
class CrossQConfig(SACConfig):
    """CrossQ hyperparameters (Bhatt et al. 2024): SAC's, with SBX's `CrossQ` defaults (lr 1e-3,
    policy delay 3, Adam β1 0.5, a 1024x1024 critic, BatchRenorm with momentum 0.99 and 100k
    warmup steps) and no target network (`tau` is not used)."""

    name: str = "crossq"
    lr: float = 1e-3
    """Learning rate of the actor, the critics and log α (SBX's CrossQ default)."""
    policy_delay: int = 3
    """Update the actor (and α) once per this many critic updates, after the critics' 3rd, 6th,
    ... (SBX's CrossQ default)."""
    critic_hidden_sizes: list[int] = field(default_factory=lambda: [1024, 1024])
    """Hidden layer widths of each critic unless `net.hidden` or `net.critic_hidden` sets them
    (SBX's default; the paper's and RL-Zoo's MuJoCo entries use [2048, 2048]). The actor's are
    `hidden_sizes`."""
    adam_beta1: float = 0.5
    """β1 of the actor's and the critics' Adam (SBX's and the paper's; the temperature's Adam
    keeps 0.9, as SBX's)."""
    batch_norm_momentum: float = 0.99
    """BatchRenorm running statistics: running ← momentum · running + (1 − momentum) · batch."""
    renorm_warmup_steps: int = 100_000
    """Train-mode passes of a BatchRenorm layer (critic updates for the critics, actor updates
    for the actor) before its r/d corrections apply; plain BatchNorm until then."""
    batch_norm_actor: bool = True
    """BatchRenorm in the actor too (SBX's default); the critics always have it."""

    def validate(self, cfg: Any) -> None:
        """SAC's checks, and what CrossQ cannot do: gSDE, a target network's `tau`."""
        super().validate(cfg)
        if self.use_sde:
            raise UserError("algo.use_sde=true: CrossQ's batch-renormalized actor has no gSDE "
                            "(SBX's neither); use algo=sac for gSDE")
        if self.tau != type(self).tau:
            raise UserError(f"algo.tau={self.tau}: CrossQ has no target network to update "
                            f"(the critics bootstrap from themselves); leave tau unset")
        widths = list(self.critic_hidden_sizes)
        if not widths or not all(0 < w <= MAX_WIDTH for w in widths):
            raise UserError(f"algo.critic_hidden_sizes={widths}: give one or more layer widths "
                            f"> 0 and <= {MAX_WIDTH:,}")
        if not 0.0 <= self.adam_beta1 < 1.0:
            raise UserError(f"algo.adam_beta1={self.adam_beta1} must be in [0, 1)")
        check_fraction("algo.batch_norm_momentum", self.batch_norm_momentum)
        if self.renorm_warmup_steps < 0:
            raise UserError(f"algo.renorm_warmup_steps={self.renorm_warmup_steps} must be >= 0")
