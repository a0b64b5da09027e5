"""Action-value networks for Discrete actions: a plain Q-network and a dueling one."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rltrain.nets.mlp import mlp


def dueling_aggregate(value: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """Q = V + A − mean_a A (Wang et al. 2016, eq. 9); `value` [B, 1], `advantage` [B, A]."""
    return value + advantage - advantage.mean(dim=-1, keepdim=True)


class QNetwork(nn.Module):
    """MLP from observations to one Q-value per action, `[B, n_actions]`."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int], act: str = "relu"):
        super().__init__()
        # PyTorch's default init, as in the DQN references (no orthogonal init).
        self.net = mlp(obs_dim, hidden, n_actions, act, ortho=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, ·) as `[B, n_actions]`."""
        return self.net(obs.flatten(1))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Greedy action `[B]` (long); exploration belongs to the algorithm, so this ignores
        `deterministic`."""
        return self(obs).argmax(dim=-1)


class DuelingQNetwork(QNetwork):
    """Shared MLP body with a state-value stream and an advantage stream (Wang et al. 2016)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int], act: str = "relu"):
        nn.Module.__init__(self)
        last = hidden[-1] if hidden else obs_dim
        self.body = mlp(obs_dim, hidden, None, act, ortho=False)
        self.value = nn.Linear(last, 1)
        self.advantage = nn.Linear(last, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, ·) = V(obs) + A(obs, ·) − mean A, as `[B, n_actions]`."""
        features = self.body(obs.flatten(1))
        return dueling_aggregate(self.value(features), self.advantage(features))


def build_q_network(obs_dim: int, n_actions: int, hidden: Sequence[int], act: str = "relu",
                    dueling: bool = False) -> QNetwork:
    """A `DuelingQNetwork` when `dueling`, else a plain `QNetwork`."""
    cls = DuelingQNetwork if dueling else QNetwork
    return cls(obs_dim, n_actions, hidden, act)
