"""`DQNConfig`: DQN's hyperparameters and their checks (the algorithm: `algos/dqn.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OffPolicyConfig
from rltrain.checks import check_fraction, check_non_negative
from rltrain.errors import UserError


@dataclass
class DQNConfig(OffPolicyConfig):
    """DQN hyperparameters (names follow Stable-Baselines3). The defaults are for a run without
    a tuned preset on a small task (classic control, one env, one gradient step per env step);
    Atari's values live in `conf/tuned/dqn_atari.yaml`."""

    name: str = "dqn"
    lr: float = 6.3e-4
    """Adam learning rate of the Q-network (at step 0 when it decays)."""
    hidden_sizes: list[int] = field(default_factory=lambda: [64, 64])
    """Hidden layer widths of the Q-network (unless `net.*` sets them)."""
    activation: str = "relu"
    """Hidden activation of the Q-network (unless `net.activation` is set)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (preallocated on the training device)."""
    learning_starts: int = 1_000
    """Env steps of uniform random actions before learning starts."""
    batch_size: int = 128
    """Transitions per gradient step."""
    tau: float = 1.0
    """Polyak coefficient: < 1 blends the target every gradient step; 1.0 copies it every
    `target_update_interval` env steps."""
    target_update_interval: int = 250
    """Env steps between hard target copies (used only when tau = 1.0). A copy that falls due
    is made before that env step's first gradient step, so a whole burst (`gradient_steps`)
    regresses toward it, as SB3's (which copies while collecting)."""
    exploration_initial_eps: float = 1.0
    """ε of the ε-greedy policy at step 0."""
    exploration_final_eps: float = 0.05
    """ε once the decay is over."""
    exploration_steps: int = 10_000
    """Env steps over which ε decays linearly (SB3's exploration_fraction × total_timesteps)."""
    double_q: bool = True
    """Double DQN: the online net picks argmax_a' Q(s', a'), the target net evaluates it."""
    dueling: bool = False
    """Dueling architecture: Q = V + A − mean_a A."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip (0 disables)."""

    def validate(self, cfg: Any) -> None:
        """Cross-field checks on top of the shared off-policy ones."""
        super().validate(cfg)
        for name in ("exploration_initial_eps", "exploration_final_eps"):
            check_fraction(f"algo.{name}", getattr(self, name))
        check_non_negative("algo.max_grad_norm", self.max_grad_norm)
        if self.exploration_steps < 0:
            raise UserError(f"algo.exploration_steps={self.exploration_steps} must be >= 0")
        if self.target_update_interval <= 0:
            raise UserError(
                f"algo.target_update_interval={self.target_update_interval} must be > 0")
        if self.net.actor_hidden is not None:
            raise UserError(f"net.actor_hidden: {self.name} has no separate policy network (its "
                            "Q-network acts greedily); set net.hidden or net.critic_hidden")
