"""Networks for continuous (Box) control: tanh actors and batched Q-ensembles.

Every actor here outputs actions in [-1, 1]; the env adapter rescales them to the env's bounds.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from rltrain.nets.encoder import encode, make_encoder
from rltrain.nets.mlp import HIDDEN_GAIN, POLICY_GAIN, activation, init_linear, mlp
from rltrain.nets.norm import batch_renorm
from rltrain.nets.sde import StateDependentNoise
from rltrain.nets.spec import NetSpec

_LOG_2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def tanh_log_det_jacobian(u: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """log |d tanh(u)/du| = log(1 − tanh(u)²) = 2 (log 2 − u − softplus(−2u)), elementwise.

    The right-hand form stays finite for large |u|, where 1 − tanh(u)² rounds to 0. `eps` > 0:
    log(1 − tanh(u)² + eps) instead (SB3's form with 1e-6), which flattens at log(eps) once
    tanh saturates, so its gradient there vanishes where the exact one stays ±2.
    """
    if eps > 0.0:
        return torch.log(1.0 - torch.tanh(u).pow(2) + eps)
    return 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))


def squashed_gaussian_log_prob(u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor,
                               eps: float = 0.0) -> torch.Tensor:
    """log π(tanh(u)) for u ~ N(mean, exp(log_std)), summed over the last dim: [B, A] -> [B]
    (`eps`: see `tanh_log_det_jacobian`)."""
    z = (u - mean) * torch.exp(-log_std)
    log_normal = -0.5 * z.pow(2) - log_std - _HALF_LOG_2PI
    return (log_normal - tanh_log_det_jacobian(u, eps)).sum(-1)


def add_gaussian_noise(action: torch.Tensor, std: float,
                       normal: torch.Tensor | None = None) -> torch.Tensor:
    """`action` + N(0, std²) noise, clipped back to [-1, 1] (DDPG/TD3 exploration); `normal`:
    the standard normal draw to use (a seed batch draws each seed's from its own stream)."""
    if std <= 0:
        return action
    normal = torch.randn_like(action) if normal is None else normal
    return (action + std * normal).clamp(-1.0, 1.0)


class DeterministicActor(nn.Module):
    """a = tanh(MLP(obs)): the DDPG/TD3 actor."""

    stochastic = False
    """No stochastic mode to evaluate: action noise is the algorithm's (`evaluate`)."""

    def __init__(self, spec: NetSpec, action_dim: int):
        super().__init__()
        self.encoder, features = make_encoder(spec)
        self.net = mlp(features, spec.hidden, action_dim, spec.activation, POLICY_GAIN,
                       spec.ortho, spec.layer_norm)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Action in [-1, 1], shape [B, A]."""
        return torch.tanh(self.net(encode(self.encoder, obs)))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Action for evaluation; the actor is deterministic, so `deterministic` is ignored."""
        return self(obs)


class SquashedGaussianActor(nn.Module):
    """a = tanh(u), u ~ N(μ(obs), σ(obs)²): the SAC actor, with the tanh-corrected log-prob.

    With gSDE (`sde=(log σ init, use_expln)`), σ(obs) comes from the noise matrix's σ and the
    features; gradient steps sample u independently per row from that Gaussian (the same
    marginal as SB3's one shared noise matrix per step, without correlating the batch), while
    acting uses `explore()` with the held noise.
    """

    def __init__(self, spec: NetSpec, action_dim: int, log_std_min: float = -20.0,
                 log_std_max: float = 2.0, sde: tuple[float, bool] | None = None,
                 squash_eps: float = 0.0):
        super().__init__()
        self.squash_eps = float(squash_eps)
        self.encoder, features = make_encoder(spec)
        self.body = mlp(features, spec.hidden, None, spec.activation, ortho=spec.ortho,
                        layer_norm=spec.layer_norm, batch_renorm=spec.batch_renorm)
        last = spec.hidden[-1] if spec.hidden else features
        self.mean = init_linear(nn.Linear(last, action_dim), POLICY_GAIN, spec.ortho)
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)
        self.sde: StateDependentNoise | None = None
        if sde is None:
            self.log_std = init_linear(nn.Linear(last, action_dim), POLICY_GAIN, spec.ortho)
        else:  # gSDE: (log σ init, use_expln); SAC trains the features through σ too (as SB3)
            self.sde = StateDependentNoise(last, action_dim, sde[0], sde[1], learn_features=True)

    def dist_params(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) of the pre-tanh Gaussian, each [B, A]; log_std is clamped."""
        return self._params(self.body(encode(self.encoder, obs)))

    def _params(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sde is None:
            return self.mean(h), self.log_std(h).clamp(self.log_std_min, self.log_std_max)
        # gSDE: the std at s is sqrt(φ(s)² σ²); the mean is kept in [-2, 2] so that tanh does
        # not saturate while the noise is small (SB3's `clip_mean=2.0` with gSDE)
        return self.mean(h).clamp(-2.0, 2.0), torch.log(self.sde.action_std(h))

    @torch.no_grad()
    def explore(self, obs: torch.Tensor) -> torch.Tensor:
        """gSDE's exploring action tanh(μ(s) + φ(s) · Θ) with the held noise Θ; [B, A]."""
        assert self.sde is not None, "explore() is the gSDE acting path"
        h = self.body(encode(self.encoder, obs))
        return torch.tanh(self._params(h)[0] + self.sde.noise(h))

    def forward(self, obs: torch.Tensor, deterministic: bool = False,
                noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(action [B, A] in [-1, 1], log π(action) [B]); reparameterized, so differentiable.
        `noise`: the standard normal draws ε of u = μ + σ ε (a seed batch draws each seed's from
        its own stream), else fresh ones."""
        u, mean, log_std = self._pre_tanh(obs, deterministic, noise)
        return torch.tanh(u), squashed_gaussian_log_prob(u, mean, log_std, self.squash_eps)

    def _pre_tanh(self, obs: torch.Tensor, deterministic: bool, noise: torch.Tensor | None,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(u = μ + σ ε, or μ when deterministic; μ; log σ), each [B, A]."""
        mean, log_std = self.dist_params(obs)
        if not deterministic and noise is None:
            noise = torch.randn_like(mean)
        return (mean if deterministic else mean + log_std.exp() * noise), mean, log_std

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True,
            noise: torch.Tensor | None = None) -> torch.Tensor:
        """tanh(μ) when deterministic, else the sample tanh(μ + σ ε) (`noise`: ε, as in
        `forward`): `forward`'s action without its log-probability, which acting never reads
        (the tanh correction and the Gaussian's log-density were ~30% of SAC's acting step)."""
        return torch.tanh(self._pre_tanh(obs, deterministic, noise)[0])


class EnsembleLinear(nn.Module):
    """`n` independent linear layers applied in one batched matmul: [n, B, in] -> [n, B, out].

    `ortho_gain` set: each member's weight is orthogonal with that gain and biases are zero;
    else each member gets the `nn.Linear` default init.
    """

    def __init__(self, n: int, in_dim: int, out_dim: int, ortho_gain: float | None = None):
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)  # the nn.Linear default init, per member
        self.weight = nn.Parameter(torch.empty(n, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, 1, out_dim).uniform_(-bound, bound))
        if ortho_gain is not None:
            with torch.no_grad():
                for member in self.weight:  # [in, out]: the transpose of an nn.Linear weight
                    member.copy_(nn.init.orthogonal_(torch.empty(out_dim, in_dim), ortho_gain).T)
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x @ W_i + b_i for every member i."""
        return ensemble_linear(x, self.weight, self.bias)


def ensemble_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`x[i] @ W[i] + b[i]` for every member i: `[n, B, in]`, `[n, in, out]`, `[n, 1, out]`.

    A layer with one output (the Q head) is a dot product per row: MKL's batched product with
    one output column is slow in both directions (2 members, 256 rows, 256 inputs, one thread:
    forward and both gradients 483 µs as `baddbmm`, 128 µs this way).
    """
    if weight.shape[-1] == 1:
        return torch.linalg.vecdot(x, weight.transpose(-1, -2)).unsqueeze(-1) + bias
    return torch.baddbmm(bias, x, weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the features of each member's rows, with a per-member scale and shift."""

    def __init__(self, n: int, dim: int):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.ones(n, 1, dim))
        self.bias = nn.Parameter(torch.zeros(n, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[n, B, dim] -> [n, B, dim]; every row is normalized on its own, as in `nn.LayerNorm`."""
        return torch.addcmul(self.bias, F.layer_norm(x, (self.dim,)), self.weight)


class QEnsemble(nn.Module):
    """`n` independent Q(s, a) MLPs evaluated in one batched call; returns [n, B], or
    [n, B, outputs] with `outputs` > 1 values per action (a quantile or distributional critic,
    whose loss the algorithm chooses: `algos/off_policy_steps.py` `critic_objective`).

    Image observations go through one CNN encoder that the members share (as in DrQ); the
    members' MLPs stay independent.
    """

    def __init__(self, spec: NetSpec, action_dim: int, n: int = 2, outputs: int = 1):
        super().__init__()
        self.n, self.outputs = n, outputs
        self.encoder, features = make_encoder(spec)
        act_cls = activation(spec.activation)
        hidden_gain, out_gain = (HIDDEN_GAIN, 1.0) if spec.ortho else (None, None)
        last = features + action_dim
        # CrossQ's (spec.batch_renorm): the input and each activation batch-renormalized
        layers: list[nn.Module] = [*batch_renorm(last, spec.batch_renorm, members=n)]
        for width in spec.hidden:
            layers.append(EnsembleLinear(n, last, width, hidden_gain))
            if spec.layer_norm:
                layers.append(EnsembleLayerNorm(n, width))
            layers.append(act_cls())
            layers.extend(batch_renorm(width, spec.batch_renorm, members=n))
            last = width
        layers.append(EnsembleLinear(n, last, outputs, out_gain))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q_i(obs, action) for every critic i, shape [n, B] ([n, B, outputs] with outputs > 1);
        a seed batch's (`nets/seeded.py`) `[S, n, B]` from `[S, B, ...]`, each seed's critics
        one block of the `[S * n, ...]` batched products."""
        x = torch.cat([encode(self.encoder, obs), action], dim=-1)
        if x.dim() == 2:  # one run's [B, F]: no reshapes in its graph (~40 µs of a SAC update)
            q = self.net(x.unsqueeze(0).expand(self.n, -1, -1))
        else:  # a seed batch's [S, B, F] as [S * n, B, F], and back
            seeds, rows = x.shape[0], x.shape[1:]
            q = self.net(x.unsqueeze(1).expand(seeds, self.n, *rows).reshape(-1, *rows))
            q = q.view(seeds, self.n, *q.shape[1:])
        return q.squeeze(-1) if self.outputs == 1 else q


class TwinQ(QEnsemble):
    """The two critics of TD3 and SAC (clipped double-Q), evaluated together."""

    def __init__(self, spec: NetSpec, action_dim: int):
        super().__init__(spec, action_dim, n=2)
