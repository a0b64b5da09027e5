"""Action distributions for stochastic policies: categorical, multi-categorical (MultiDiscrete),
Bernoulli (MultiBinary) and diagonal Gaussian.

Both are small tensor-only classes rather than `torch.distributions` objects: a PPO minibatch
step on CartPole spent half its time in `Categorical`'s bookkeeping (measured: log-prob + entropy
+ backward of a [256, 2] batch ran 3.6k/s through `Categorical`, 7.8k/s as plain tensor ops).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rltrain.nets.mlp import init_linear

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


MASKED_LOGIT = -1e8
"""The logit of an invalid action: its probability underflows to exactly 0, yet p · log p stays
0 · (−1e8) = 0 in the entropy (−inf would give nan there)."""


class CategoricalDist:
    """A batch of categorical distributions given by logits [B, n]; `mask` [B, n] (bool, True =
    valid) gives invalid actions probability 0, so sampling, the mode, log-probabilities and
    the entropy cover the valid actions only."""

    def __init__(self, logits: torch.Tensor, mask: torch.Tensor | None = None):
        if mask is not None:
            logits = logits.masked_fill(~mask, MASKED_LOGIT)
        self.log_probs = torch.log_softmax(logits, dim=-1)

    noise = "uniform"
    """What `sample(noise)` takes: uniform draws in [0, 1) shaped like the logits."""

    def sample(self, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Indices [B] (Gumbel-max: argmax of log p + Gumbel noise); `noise`: the uniform
        draws to use (a seed batch draws each seed's from its own generator), else fresh ones."""
        u = (torch.rand_like(self.log_probs) if noise is None else noise.clone()).clamp_(min=1e-20)
        return (self.log_probs - torch.log(-torch.log(u))).argmax(-1)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """log p(action) [B] for long indices [B]."""
        return self.log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """−Σ p log p, [B]."""
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def mode(self) -> torch.Tensor:
        """The most likely action [B]."""
        return self.log_probs.argmax(-1)


class MultiCategoricalDist:
    """One categorical per action dimension: logits `[B, sum(nvec)]`, dimension i taking the
    next `nvec[i]` columns (so does the optional bool `mask`, sb3-contrib's layout). Actions are
    long `[B, k]`; log-probability and entropy are summed over the dimensions."""

    def __init__(self, logits: torch.Tensor, nvec: tuple[int, ...],
                 mask: torch.Tensor | None = None):
        parts = torch.split(logits, list(nvec), dim=-1)
        masks = torch.split(mask, list(nvec), dim=-1) if mask is not None else [None] * len(parts)
        self.dims = [CategoricalDist(p, m) for p, m in zip(parts, masks, strict=True)]

    def sample(self) -> torch.Tensor:
        return torch.stack([d.sample() for d in self.dims], dim=-1)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        return sum(d.log_prob(action[..., i]) for i, d in enumerate(self.dims))  # type: ignore[return-value]

    def entropy(self) -> torch.Tensor:
        return sum(d.entropy() for d in self.dims)  # type: ignore[return-value]

    def mode(self) -> torch.Tensor:
        return torch.stack([d.mode() for d in self.dims], dim=-1)


class BernoulliDist:
    """Independent Bernoullis given by logits `[B, n]`; actions are 0./1. floats `[B, n]`;
    log-probability and entropy summed over the dimensions, computed from the logits with
    softplus (no log(0) however sure the policy is)."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def sample(self) -> torch.Tensor:
        return (torch.rand_like(self.logits) < torch.sigmoid(self.logits)).to(self.logits.dtype)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Σ a log p + (1 - a) log(1 - p), with log p = -softplus(-l), log(1-p) = -softplus(l)."""
        a = action.to(self.logits.dtype)
        return -(a * nn.functional.softplus(-self.logits)
                 + (1 - a) * nn.functional.softplus(self.logits)).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Σ p softplus(-l) + (1 - p) softplus(l)."""
        p = torch.sigmoid(self.logits)
        return (p * nn.functional.softplus(-self.logits)
                + (1 - p) * nn.functional.softplus(self.logits)).sum(-1)

    def mode(self) -> torch.Tensor:
        return (self.logits > 0).to(self.logits.dtype)


class DiagGaussianDist:
    """A batch of diagonal Gaussians: mean [B, A], log_std broadcastable to it."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean, self.log_std = mean, log_std.expand_as(mean)

    noise = "normal"
    """What `sample(noise)` takes: standard normal draws shaped like the mean."""

    def sample(self, noise: torch.Tensor | None = None) -> torch.Tensor:
        """mean + std · ε, [B, A]; `noise`: the ε to use, else fresh draws."""
        eps = torch.randn_like(self.mean) if noise is None else noise
        return self.mean + self.log_std.exp() * eps

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Joint log-density of `action` [B, A], summed over action dimensions: [B]."""
        z = (action - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.pow(2) - self.log_std - _HALF_LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Σ (½ + ½ log 2π + log σ), [B]."""
        return (self.log_std + 0.5 + _HALF_LOG_2PI).sum(-1)

    def mode(self) -> torch.Tensor:
        """The mean [B, A]."""
        return self.mean


def policy_layer(in_dim: int, out_dim: int, ortho: bool) -> nn.Linear:
    """The action layer: orthogonal with gain 0.01 (near-uniform, near-zero-mean actions at the
    start) when `ortho`, else PyTorch's default init, as SB3 does with `ortho_init=False`."""
    return init_linear(nn.Linear(in_dim, out_dim), 0.01, ortho)


Dist = CategoricalDist | MultiCategoricalDist | BernoulliDist | DiagGaussianDist


def kl_divergence(p: Dist, q: Dist) -> torch.Tensor:
    """KL(p ‖ q) per row, [B], summed over action dimensions, for two distributions of the same
    kind (a gSDE head's `SDEDist` is a diagonal Gaussian). A masked categorical's invalid
    actions have probability exactly 0 under `p` and add 0."""
    if isinstance(p, DiagGaussianDist) and isinstance(q, DiagGaussianDist):
        var_p, var_q = (2 * p.log_std).exp(), (2 * q.log_std).exp()
        return (q.log_std - p.log_std + (var_p + (p.mean - q.mean).pow(2)) / (2 * var_q)
                - 0.5).sum(-1)
    if isinstance(p, CategoricalDist) and isinstance(q, CategoricalDist):
        return (p.log_probs.exp() * (p.log_probs - q.log_probs)).sum(-1)
    if isinstance(p, MultiCategoricalDist) and isinstance(q, MultiCategoricalDist):
        return sum(kl_divergence(a, b) for a, b in zip(p.dims, q.dims, strict=True))  # type: ignore[return-value]
    if isinstance(p, BernoulliDist) and isinstance(q, BernoulliDist):
        softplus = nn.functional.softplus  # log p = −softplus(−l), log(1 − p) = −softplus(l)
        prob = torch.sigmoid(p.logits)
        return (prob * (softplus(-q.logits) - softplus(-p.logits))
                + (1 - prob) * (softplus(q.logits) - softplus(p.logits))).sum(-1)
    raise TypeError(f"no KL divergence between {type(p).__name__} and {type(q).__name__}")


class PolicyHead(nn.Module):
    """What every head offers the algorithms: a distribution's log-probability of an action
    (joint over action dimensions), entropy and mode, read off the distribution `forward` made."""

    @staticmethod
    def log_prob(dist: Dist, action: torch.Tensor) -> torch.Tensor:
        return dist.log_prob(action)

    @staticmethod
    def entropy(dist: Dist) -> torch.Tensor:
        return dist.entropy()

    @staticmethod
    def mode(dist: Dist) -> torch.Tensor:
        return dist.mode()


class CategoricalHead(PolicyHead):
    """Logits -> `CategoricalDist` over `n` actions."""

    def __init__(self, in_dim: int, n: int, ortho: bool = True):
        super().__init__()
        self.logits = policy_layer(in_dim, n, ortho)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> CategoricalDist:
        return CategoricalDist(self.logits(features), mask)


class MultiCategoricalHead(CategoricalHead):
    """Logits -> `MultiCategoricalDist`, one categorical per MultiDiscrete dimension."""

    def __init__(self, in_dim: int, nvec: tuple[int, ...], ortho: bool = True):
        super().__init__(in_dim, int(sum(nvec)), ortho)
        self.nvec = tuple(int(n) for n in nvec)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None):  # type: ignore[override]
        return MultiCategoricalDist(self.logits(features), self.nvec, mask)


class BernoulliHead(CategoricalHead):
    """Logits -> `BernoulliDist`, one 0/1 choice per MultiBinary dimension."""

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None):  # type: ignore[override]
        if mask is not None:
            raise ValueError("invalid-action masks are not supported for MultiBinary actions")
        return BernoulliDist(self.logits(features))


def choice_head(spec, in_dim: int, ortho: bool) -> nn.Module:
    """The head of a policy over a finite action space (`spec.action_kind` discrete,
    multi_discrete or multi_binary); Box actions get a Gaussian or gSDE head instead."""
    if spec.action_kind == "multi_discrete":
        return MultiCategoricalHead(in_dim, spec.action_nvec, ortho)
    if spec.action_kind == "multi_binary":
        return BernoulliHead(in_dim, spec.action_dim, ortho)
    return CategoricalHead(in_dim, spec.action_dim, ortho)


class GaussianHead(PolicyHead):
    """Mean from the features, state-independent learned log-std; actions live in [-1, 1] scale."""

    def __init__(self, in_dim: int, dim: int, log_std_init: float = 0.0,
                 log_std_min: float = -20.0, log_std_max: float = 2.0, ortho: bool = True):
        super().__init__()
        self.mean = policy_layer(in_dim, dim, ortho)
        self.log_std = nn.Parameter(torch.full((dim,), float(log_std_init)))
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def forward(self, features: torch.Tensor) -> DiagGaussianDist:
        # [A] (a seed batch's [S, A]) broadcast over the rows of the batch
        log_std = self.log_std.clamp(self.log_std_min, self.log_std_max).unsqueeze(-2)
        return DiagGaussianDist(self.mean(features), log_std)
