"""`PQNConfig`: PQN's hyperparameters and their checks (the algorithm: `algos/pqn.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.algos.configs.base import OnPolicyConfig, check_minibatches
from rltrain.checks import check_fraction, check_non_negative
from rltrain.errors import UserError
from rltrain.nets.config import NetConfig


@dataclass
class PQNConfig(OnPolicyConfig):
    """PQN hyperparameters (parallel Q-learning, Gallici et al. 2024): the defaults are CleanRL's
    `cleanrl/pqn.py` (CartPole-v1), under rltrain's names (`n_steps` is CleanRL's `num_steps`,
    `batch_size` its minibatch size `num_envs * num_steps / num_minibatches`, `n_epochs` its
    `update_epochs`, `gae_lambda` its `q_lambda`, `exploration_steps` its
    `exploration_fraction * total_timesteps`). The Q-network has a LayerNorm after each hidden
    Linear (`net.layer_norm`, true here). The loop is the on-policy one: a rollout, then the
    Q(λ) returns (GAE with V(s) = max_a Q(s, a)), then minibatch epochs; no replay, no target
    network."""

    name: str = "pqn"
    lr: float = 2.5e-4
    """Adam learning rate of the Q-network (at the start when `anneal_lr`)."""
    hidden_sizes: list[int] = field(default_factory=lambda: [120, 84])
    """Hidden layer widths of the Q-network (unless `net.*` sets them)."""
    activation: str = "relu"
    """Hidden activation of the Q-network (unless `net.activation` is set)."""
    net: NetConfig = field(default_factory=lambda: NetConfig(layer_norm=True))
    """Network settings (`net.*`); PQN's `net.layer_norm` is true (its Q-network normalizes
    every hidden layer: the paper's replacement for a target network)."""
    n_steps: int = 128
    """Steps per env per rollout; the batch is n_steps * env.num_envs."""
    gae_lambda: float = 0.65
    """λ of the Q(λ) returns R_t = r_t + γ[(1 − λ) max_a Q(s_{t+1}, a) + λ R_{t+1}]
    (CleanRL's `q_lambda`; 0: one-step Q-learning targets, 1: Monte-Carlo returns)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run."""
    batch_size: int = 128
    """Minibatch size; must divide n_steps * env.num_envs."""
    n_epochs: int = 4
    """Passes over the rollout per update."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip (0 disables)."""
    exploration_initial_eps: float = 1.0
    """ε of the ε-greedy policy at step 0."""
    exploration_final_eps: float = 0.05
    """ε once the decay is over."""
    exploration_steps: int = 250_000
    """Env steps over which ε decays linearly (CleanRL's exploration_fraction 0.5 × its
    total_timesteps 500k)."""

    def validate(self, cfg: Any) -> None:
        """The on-policy checks, then PQN's own."""
        super().validate(cfg)
        check_minibatches(self, cfg)
        for name in ("exploration_initial_eps", "exploration_final_eps"):
            check_fraction(f"algo.{name}", getattr(self, name))
        check_non_negative("algo.max_grad_norm", self.max_grad_norm)
        if self.exploration_steps < 0:
            raise UserError(f"algo.exploration_steps={self.exploration_steps} must be >= 0")
        if self.use_sde:
            raise UserError("algo.use_sde=true: pqn acts ε-greedily on Discrete actions; "
                            "drop algo.use_sde")
        if self.net.actor_hidden is not None:
            raise UserError(f"net.actor_hidden: {self.name} has no separate policy network (its "
                            "Q-network acts greedily); set net.hidden or net.critic_hidden")
        if self.net.share_encoder:
            raise UserError("net.share_encoder: pqn has one network (its Q-network); drop "
                            "net.share_encoder")
