"""Action-value networks for Discrete actions: an MLP body with a plain or a dueling Q head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rltrain.nets.mlp import mlp


def dueling_aggregate(value: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """Q = V + A − mean_a A (Wang et al. 2016, eq. 9); `value` [B, 1], `advantage` [B, A]."""
    return value + advantage - advantage.mean(dim=-1, keepdim=True)


class DuelingHead(nn.Module):
    """Features -> Q through a state-value stream and an advantage stream (Wang et al. 2016)."""

    def __init__(self, in_dim: int, n_actions: int):
        super().__init__()
        self.value = nn.Linear(in_dim, 1)
        self.advantage = nn.Linear(in_dim, n_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Q(s, ·) = V(s) + A(s, ·) − mean A, as `[B, n_actions]`."""
        return dueling_aggregate(self.value(features), self.advantage(features))


class QNetwork(nn.Module):
    """MLP from observations to one Q-value per action, `[B, n_actions]`; dueling head optional."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int], act: str = "relu",
                 dueling: bool = False):
        super().__init__()
        last = hidden[-1] if hidden else obs_dim
        # PyTorch's default init, as in the DQN references (no orthogonal init).
        self.body = mlp(obs_dim, hidden, None, act, ortho=False)
        self.head = DuelingHead(last, n_actions) if dueling else nn.Linear(last, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, ·) as `[B, n_actions]`."""
        return self.head(self.body(obs.flatten(1)))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Greedy action `[B]` (long). ε-greedy exploration belongs to the algorithm, so
        `deterministic` is accepted for the policy interface and ignored."""
        return self(obs).argmax(dim=-1)
