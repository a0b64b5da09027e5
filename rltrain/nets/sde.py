"""Generalized state-dependent exploration (gSDE; Raffin, Kober and Stulp 2021).

The exploration noise is a function of the state, ε(s) = φ(s) · Θ, where φ(s) are the policy's
last hidden features [B, F] and Θ [F, A] is drawn from N(0, σ²) elementwise and held for several
steps, so consecutive actions move together (smooth, exploring trajectories instead of per-step
jitter). Conditioned on s, the action is Gaussian with per-dimension std
sqrt(Σ_i φ_i(s)² σ_ij²), which is what the log-probability and entropy use.

`NoiseClock` says when Θ is drawn again; each env row has its own Θ.
"""

from __future__ import annotations

import torch
from torch import nn

from rltrain.nets.heads import DiagGaussianDist, GaussianHead, choice_head, policy_layer
from rltrain.types import CHOICE_KINDS

_VAR_EPS = 1e-6
"""Added to the variance so that a zero feature vector still gives a finite log-density."""


class NoiseClock:
    """Counts acting calls; `tick()` is True when the noise matrices are due to be drawn again.

    `period` > 0: every `period` calls; otherwise only at the first call after `restart()`
    (PPO and A2C restart it after every update, so -1 means once per rollout, as in SB3).
    """

    def __init__(self, period: int):
        self.period, self.count = int(period), 0

    def tick(self) -> bool:
        """Advance one acting call; True when the noise should be resampled before it."""
        due = self.count == 0 or (self.period > 0 and self.count % self.period == 0)
        self.count += 1
        return due

    def restart(self) -> None:
        """The next `tick()` resamples (a new rollout begins)."""
        self.count = 0


class StateDependentNoise(nn.Module):
    """The learned σ [F, A] (as log σ) and the held noise matrices Θ [N, F, A], one per env row.

    `learn_features=False` (SB3's choice for PPO/A2C) keeps the std's gradient out of the
    features; SAC lets it through (SB3's `learn_features=True` for SAC).
    `use_expln`: σ = exp(log σ) below 0 and log(log σ + 1) + 1 above, which grows slowly and
    keeps the std from exploding (SB3's `use_expln`).
    """

    def __init__(self, feature_dim: int, action_dim: int, log_std_init: float,
                 use_expln: bool = False, learn_features: bool = False):
        super().__init__()
        self.log_std = nn.Parameter(torch.full((feature_dim, action_dim), float(log_std_init)))
        self.use_expln, self.learn_features = use_expln, learn_features
        # Not saved with the weights (its first dim is the env count, which eval may change);
        # algorithms save it with their own state for an exact resume.
        self.register_buffer("matrices", torch.zeros(0, feature_dim, action_dim), persistent=False)

    def std(self) -> torch.Tensor:
        """σ [F, A]."""
        if not self.use_expln:
            return self.log_std.exp()
        below = self.log_std.clamp(max=0.0).exp()
        above = torch.log1p(self.log_std.clamp(min=0.0)) + 1.0
        return torch.where(self.log_std <= 0, below, above)

    def action_std(self, features: torch.Tensor) -> torch.Tensor:
        """sqrt(φ(s)² σ² + eps), the std of each action dimension at each row: [B, A]."""
        if not self.learn_features:
            features = features.detach()
        return torch.sqrt(features.pow(2) @ self.std().pow(2) + _VAR_EPS)

    @torch.no_grad()
    def resample(self, n: int) -> None:
        """Draw Θ ~ N(0, σ²) for `n` env rows."""
        std = self.std()
        self.matrices = torch.randn(n, *std.shape, device=std.device, dtype=std.dtype) * std

    def noise(self, features: torch.Tensor) -> torch.Tensor:
        """ε(s) = φ(s) · Θ_row for each row [B, A]; draws Θ first if the row count changed."""
        if self.matrices.shape[0] != features.shape[0]:
            self.resample(features.shape[0])
        return torch.bmm(features.detach().unsqueeze(1), self.matrices).squeeze(1)


class SDEDist(DiagGaussianDist):
    """N(mean, action_std(s)²) whose `sample()` is mean + φ(s) · Θ with the held Θ."""

    def __init__(self, mean: torch.Tensor, features: torch.Tensor, sde: StateDependentNoise):
        super().__init__(mean, torch.log(sde.action_std(features)))
        self.features, self.sde = features, sde

    def sample(self) -> torch.Tensor:
        """The held-noise action [B, A] (exploration), not an independent draw."""
        return self.mean + self.sde.noise(self.features)


class SDEHead(nn.Module):
    """The gSDE counterpart of `GaussianHead` for PPO and A2C: a linear mean and σ [F, A]."""

    def __init__(self, in_dim: int, dim: int, log_std_init: float = -2.0,
                 use_expln: bool = False, ortho: bool = True):
        super().__init__()
        self.mean = policy_layer(in_dim, dim, ortho)
        self.sde = StateDependentNoise(in_dim, dim, log_std_init, use_expln, learn_features=False)

    def forward(self, features: torch.Tensor) -> SDEDist:
        return SDEDist(self.mean(features), features, self.sde)

    # an SDEDist is a DiagGaussianDist: the Gaussian head's readers apply unchanged
    log_prob = staticmethod(GaussianHead.log_prob)
    entropy = staticmethod(GaussianHead.entropy)
    mode = staticmethod(GaussianHead.mode)


def sde_state(sde: StateDependentNoise, clock: NoiseClock) -> dict[str, object]:
    """The held noise and the clock as plain data, for an exact resume."""
    return {"matrices": sde.matrices.detach().clone(), "count": int(clock.count)}


def load_sde_state(sde: StateDependentNoise, clock: NoiseClock, state: dict[str, object]) -> None:
    """Restore `sde_state()`."""
    matrices, count = state.get("matrices"), state.get("count")
    if not isinstance(matrices, torch.Tensor) or matrices.dim() != 3 \
            or tuple(matrices.shape[1:]) != tuple(sde.log_std.shape) or type(count) is not int:
        raise ValueError(f"the saved gSDE noise does not fit: matrices "
                         f"{list(getattr(matrices, 'shape', []))}, count {count!r}; expected "
                         f"[N, {', '.join(map(str, sde.log_std.shape))}] and an int")
    sde.matrices = matrices.to(sde.log_std.device, sde.log_std.dtype).clone()
    clock.count = count


def policy_head(spec, in_dim: int, ortho: bool, log_std_init: float = 0.0,
                log_std_bounds: tuple[float, float] = (-20.0, 2.0),
                sde: tuple[bool, bool] = (False, False)) -> nn.Module:
    """The action head of a PPO/A2C policy for `spec`'s action space: a categorical kind
    (`heads.choice_head`), else gSDE when `sde[0]` (use_sde, use_expln), else a Gaussian."""
    if spec.action_kind in CHOICE_KINDS:
        return choice_head(spec, in_dim, ortho)
    if sde[0]:
        return SDEHead(in_dim, spec.action_dim, log_std_init, sde[1], ortho)
    return GaussianHead(in_dim, spec.action_dim, log_std_init, *log_std_bounds, ortho=ortho)
