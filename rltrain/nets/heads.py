"""Action distributions for stochastic policies: categorical and diagonal Gaussian."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical, Normal


class CategoricalHead(nn.Module):
    """Logits -> Categorical over `n` actions."""

    def __init__(self, in_dim: int, n: int):
        super().__init__()
        self.logits = nn.Linear(in_dim, n)
        nn.init.orthogonal_(self.logits.weight, 0.01)
        nn.init.zeros_(self.logits.bias)

    def forward(self, features: torch.Tensor) -> Categorical:
        return Categorical(logits=self.logits(features), validate_args=False)

    @staticmethod
    def log_prob(dist: Categorical, action: torch.Tensor) -> torch.Tensor:
        """Log-probability of `action` [B] (long)."""
        return dist.log_prob(action)

    @staticmethod
    def entropy(dist: Categorical) -> torch.Tensor:
        return dist.entropy()

    @staticmethod
    def mode(dist: Categorical) -> torch.Tensor:
        return dist.probs.argmax(-1)


class GaussianHead(nn.Module):
    """Mean from the features, state-independent learned log-std; actions live in [-1, 1] scale."""

    def __init__(self, in_dim: int, dim: int, log_std_init: float = 0.0):
        super().__init__()
        self.mean = nn.Linear(in_dim, dim)
        nn.init.orthogonal_(self.mean.weight, 0.01)
        nn.init.zeros_(self.mean.bias)
        self.log_std = nn.Parameter(torch.full((dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> Normal:
        mean = self.mean(features)
        return Normal(mean, self.log_std.clamp(-20.0, 2.0).exp().expand_as(mean), validate_args=False)

    @staticmethod
    def log_prob(dist: Normal, action: torch.Tensor) -> torch.Tensor:
        """Joint log-probability of `action` [B, A], summed over action dimensions."""
        return dist.log_prob(action).sum(-1)

    @staticmethod
    def entropy(dist: Normal) -> torch.Tensor:
        return dist.entropy().sum(-1)

    @staticmethod
    def mode(dist: Normal) -> torch.Tensor:
        return dist.mean
