"""`PPOConfig`: PPO's hyperparameters and their checks (the algorithm: `algos/ppo.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rltrain.algos.configs.base import OnPolicyConfig, check_minibatches
from rltrain.checks import check_non_negative, check_positive
from rltrain.errors import UserError
from rltrain.nets.config import RECURRENT_CORES
from rltrain.text import plural

MIN_AUTO_BPTT = 8
"""The shortest sequences `bptt_len=0` may choose: fewer steps cut the gradient through time
to almost nothing (an explicit `bptt_len` is taken as given)."""


@dataclass
class PPOConfig(OnPolicyConfig):
    """PPO hyperparameters (names follow Stable-Baselines3)."""

    name: str = "ppo"
    batch_size: int = 64
    """Minibatch size; must divide n_steps * env.num_envs."""
    n_epochs: int = 10
    """Passes over the rollout per update."""
    clip_range: float = 0.2
    """Clip ε of the surrogate ratio."""
    clip_range_vf: float | None = None
    """Clip value updates to ± this around the old value (None: no value clipping)."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (0 disables)."""
    normalize_advantage: bool = True
    """Normalize advantages per minibatch."""
    target_kl: float | None = None
    """Stop the epochs early when the approximate KL exceeds 1.5 × this (None: never)."""
    adam_eps: float = 1e-5
    """Epsilon of Adam's denominator (1e-5 as in the PPO reference code; torch's default is 1e-8)."""
    recurrent: str = "none"
    """`lstm` or `gru`: a recurrent core between the encoder and the heads (`algo=ppo_lstm`
    sets lstm); `none`: a feed-forward policy."""
    recurrent_hidden_size: int = 64
    """Units of the recurrent core (SB3-contrib's `lstm_hidden_size`)."""
    recurrent_layers: int = 1
    """Stacked layers of the recurrent core."""
    shared_recurrent: bool = False
    """One core feeds actor and critic (false: each has its own, SB3-contrib's
    `enable_critic_lstm`)."""
    bptt_len: int = 0
    """Truncated backpropagation through time: each env's rollout is cut into sequences of this
    many steps, each starting from the state stored when it was collected (0: the longest that
    tiles both the rollout and the minibatches, gcd(n_steps, batch_size): the whole rollout
    when batch_size is a multiple of n_steps)."""

    def sequence_len(self) -> int:
        """S, the steps of each training sequence of a recurrent policy (see `bptt_len`)."""
        return self.bptt_len or math.gcd(self.n_steps, self.batch_size)

    def validate(self, cfg: Any) -> None:
        """Cross-field checks against the run config."""
        super().validate(cfg)
        check_minibatches(self, cfg)
        for name in ("clip_range", "clip_range_vf", "target_kl"):  # the last two: None or > 0
            check_positive(f"algo.{name}", getattr(self, name))
        for name in ("ent_coef", "vf_coef", "max_grad_norm", "adam_eps"):
            check_non_negative(f"algo.{name}", getattr(self, name))
        self._validate_recurrent()

    def _validate_recurrent(self) -> None:
        """The core's kind and sizes; sequences that tile the rollout and the minibatches."""
        if self.recurrent not in ("none", *RECURRENT_CORES):
            raise UserError(f"algo.recurrent={self.recurrent!r}: choose none, lstm or gru")
        for name in ("recurrent_hidden_size", "recurrent_layers"):
            if getattr(self, name) <= 0:
                raise UserError(f"algo.{name}={getattr(self, name)} must be > 0")
        if self.bptt_len < 0:
            raise UserError(f"algo.bptt_len={self.bptt_len} must be >= 0 (0: automatic)")
        seq = self.sequence_len()
        if self.recurrent != "none" and not self.bptt_len and seq < min(MIN_AUTO_BPTT, self.n_steps):
            raise UserError(f"algo.bptt_len=0 gives sequences of {plural(seq, 'step')}, the gcd of "
                            f"algo.n_steps={self.n_steps} and algo.batch_size={self.batch_size}: "
                            f"too short for memory; pick a batch_size that shares a longer "
                            f"divisor with n_steps, or set algo.bptt_len")
        if self.recurrent != "none" and (self.n_steps % seq or self.batch_size % seq):
            raise UserError(f"algo.bptt_len={seq} must divide algo.n_steps={self.n_steps} and "
                            f"algo.batch_size={self.batch_size} (minibatches of whole sequences)")
