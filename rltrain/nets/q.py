"""Action-value networks for Discrete actions: an encoder and MLP body with a plain or a dueling
Q head, or (QR-DQN) a head of several quantiles per action."""

from __future__ import annotations

import torch
from torch import nn

from rltrain.nets.encoder import encode, make_encoder
from rltrain.nets.mlp import init_linear, mlp
from rltrain.nets.spec import NetSpec


def dueling_aggregate(value: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """Q = V + A − mean_a A (Wang et al. 2016, eq. 9); `value` [B, 1], `advantage` [B, A]."""
    return value + advantage - advantage.mean(dim=-1, keepdim=True)


class DuelingHead(nn.Module):
    """Features -> Q through a state-value stream and an advantage stream (Wang et al. 2016)."""

    def __init__(self, in_dim: int, n_actions: int, ortho: bool = False):
        super().__init__()
        self.value = init_linear(nn.Linear(in_dim, 1), 1.0, ortho)
        self.advantage = init_linear(nn.Linear(in_dim, n_actions), 1.0, ortho)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Q(s, ·) = V(s) + A(s, ·) − mean A, as `[B, n_actions]`."""
        return dueling_aggregate(self.value(features), self.advantage(features))


class QNetwork(nn.Module):
    """Observations to one Q-value per action, `[B, n_actions]`: encoder, MLP body, then a
    plain or a dueling head. PyTorch's default init unless `spec.ortho`, as in the DQN
    references."""

    stochastic = False
    """No stochastic mode to evaluate: ε-greedy exploration is the algorithm's (`evaluate`)."""

    def __init__(self, spec: NetSpec, n_actions: int, dueling: bool = False):
        super().__init__()
        self.encoder, features = make_encoder(spec)
        last = spec.hidden[-1] if spec.hidden else features
        self.body = mlp(features, spec.hidden, None, spec.activation, ortho=spec.ortho,
                        layer_norm=spec.layer_norm)
        self.head = (DuelingHead(last, n_actions, spec.ortho) if dueling
                     else init_linear(nn.Linear(last, n_actions), 1.0, spec.ortho))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, ·) as `[B, n_actions]`."""
        return self.head(self.body(encode(self.encoder, obs)))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Greedy action `[B]` (long), among the valid ones when `action_mask` [B, n] is given.
        ε-greedy exploration belongs to the algorithm, so `deterministic` is accepted for the
        policy interface and ignored."""
        return masked_argmax(self(obs), action_mask)


class QuantileQNetwork(QNetwork):
    """Observations to `n_quantiles` values per action, `[B, n_actions, n_quantiles]`: the
    quantiles of the return's distribution at τ̂_i = (2i + 1) / 2N (QR-DQN, Dabney et al. 2017);
    Q(s, a) is their mean. QNetwork's encoder and body under a plain Linear head of
    n_actions · n_quantiles outputs (Linear layers only: a seed batch stacks it as it is)."""

    def __init__(self, spec: NetSpec, n_actions: int, n_quantiles: int):
        super().__init__(spec, n_actions * n_quantiles)
        self.n_actions, self.n_quantiles = n_actions, n_quantiles

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The quantiles θ(obs, ·) as `[B, n_actions, n_quantiles]`."""
        return super().forward(obs).unflatten(-1, (self.n_actions, self.n_quantiles))

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, ·) = the mean over the quantiles, `[B, n_actions]`."""
        return self(obs).mean(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Greedy action `[B]` (long) by the mean over the quantiles, among the valid ones when
        `action_mask` [B, n] is given (`deterministic` ignored, as QNetwork's)."""
        return masked_argmax(self.q_values(obs), action_mask)


def masked_argmax(q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """argmax over the last dim, over the entries `mask` allows (all when None); `[B]`."""
    if mask is not None:
        q = q.masked_fill(~mask, torch.finfo(q.dtype).min)
    return q.argmax(dim=-1)
