"""The networks of S seeds (one architecture) run as one: parameters stacked `[S, ...]`.

A `Linear` of seed k is `x[k] @ W[k]ᵀ + b[k]`; for all seeds at once that is one `baddbmm` over
`[S, B, in]`. Activations and the distributions of `nets/heads.py` act on the last dimension, so
they take the leading seed dimension as they are. Seeds share no parameter: the gradient of a
sum of per-seed losses gives each seed exactly its own gradient. The stacked tensors are the
ones trained; each seed's own module gets its parameters copied back (`copy_to`) before its
evaluation or checkpoint reads them.

Not bit for bit: the hidden layers' forward matched `nn.Linear` per slice exactly here (the
heads are summed another way, `_linear`), but the backward of a 4-input first layer differed by
~6e-9 (the weight gradient is summed in another order), and reductions over `[S, B]` along B
differ from those over `[B]` in the last bit, by an amount that depends on the CPU's kernels.
Training amplifies such differences once one crosses a threshold (a ratio at PPO's clip, an
action at its bound), about tenfold every 10-20 steps from a step that depends on the CPU: a
seed in a batch starts from its single run's weights and streams, stays close to it for its
first updates (measured 2026-11-27 under four kernel settings: PPO CartPole 9 updates within
1e-5, SAC Pendulum 83 gradient steps, TD3 164; PPO Pendulum's clip can part them in its first
update), then follows its own trajectory of the same distribution
(tests/seeds/test_equivalence.py, benchmarks/seed_batch.py).
"""

from __future__ import annotations

import torch
from torch import nn

from rltrain.errors import UserError
from rltrain.nets.activations import tanh
from rltrain.nets.actor_critic import ActorCritic
from rltrain.nets.continuous import (
    DeterministicActor,
    EnsembleLayerNorm,
    EnsembleLinear,
    QEnsemble,
    SquashedGaussianActor,
    ensemble_linear,
    squashed_gaussian_log_prob,
)
from rltrain.nets.heads import CategoricalDist, CategoricalHead, DiagGaussianDist, GaussianHead
from rltrain.nets.mlp import ACTIVATIONS
from rltrain.nets.q import DuelingHead, QNetwork, dueling_aggregate

_LAYERS = (nn.Linear, nn.LayerNorm, EnsembleLinear, EnsembleLayerNorm, *ACTIVATIONS.values())

Weights = dict[str, torch.Tensor]
"""Parameter name -> the S seeds' tensors stacked `[S, *shape]`."""


class NotStackable(UserError):
    """The seeds' networks cannot run stacked: `what` says which part (an on-policy batch then
    runs each seed's own member, `seeds/members.py`; an off-policy batch is refused)."""

    def __init__(self, what: str):
        super().__init__(f"num_seeds > 1 cannot stack {what} yet; use num_seeds=1")
        self.what = what


def _check_layers(*seqs: nn.Sequential) -> None:
    for seq in seqs:
        for layer in seq:
            if not isinstance(layer, _LAYERS):
                raise NotStackable(f"a {type(layer).__name__} layer")


def _check_vector_obs(*encoders: nn.Module | None) -> None:
    if any(e is not None for e in encoders):
        raise NotStackable("an observation encoder (images, Dict or categorical observations)")


def check_stackable(policy: nn.Module) -> None:
    """Refuse, in one line, a network the batch cannot run (what it can: MLP actor-critics with
    a categorical or Gaussian head, and MLP Q-networks, plain or dueling, on vector obs)."""
    if isinstance(policy, QNetwork | SquashedGaussianActor):
        _check_vector_obs(policy.encoder)
        _check_layers(policy.body)
        if getattr(policy, "sde", None) is not None:
            raise NotStackable("gSDE (algo.use_sde)")
        return
    if isinstance(policy, DeterministicActor):
        _check_vector_obs(policy.encoder)
        _check_layers(policy.net)
        return
    if isinstance(policy, QEnsemble):
        _check_vector_obs(policy.encoder)
        _check_layers(policy.net)
        return
    if type(policy) is not ActorCritic:
        raise NotStackable(f"a {type(policy).__name__} (a recurrent core)")
    if policy.shared:
        raise NotStackable("a shared encoder (net.share_encoder)")
    _check_vector_obs(policy.actor_encoder, policy.critic_encoder)
    if type(policy.head) not in (CategoricalHead, GaussianHead):
        raise NotStackable(f"a {type(policy.head).__name__} (MultiDiscrete, MultiBinary or gSDE "
                           "actions)")
    _check_layers(policy.actor_body, policy.critic)


class Stacked:
    """The parameters of S modules of one architecture as stacked leaf tensors `params[name]`,
    their buffers (BatchNorm statistics) as `stacked_buffers[name]`; `copy_to` writes seed k's
    into its own module, `copy_from` loads them from there."""

    def __init__(self, modules: list[nn.Module], requires_grad: bool = True):
        for module in modules:
            check_stackable(module)
        self.template = modules[0]
        self.seeds = len(modules)
        per_seed = [dict(m.named_parameters()) for m in modules]
        transposed = _linear_weights(self.template)
        self.params: Weights = {
            name: stack_seeds([ps[name].detach() for ps in per_seed], name in transposed)
            .requires_grad_(requires_grad)
            for name in per_seed[0]}
        seed_buffers = [dict(m.named_buffers()) for m in modules]
        self.stacked_buffers: Weights = {
            name: torch.stack([bs[name].detach() for bs in seed_buffers]) for name in seed_buffers[0]}

    def parameters(self) -> list[torch.Tensor]:
        """The stacked tensors, in the order of the template's `parameters()`."""
        return list(self.params.values())

    def buffers(self) -> list[torch.Tensor]:
        """The stacked buffers, in the order of the template's `buffers()` (as `polyak_update`
        takes a module's)."""
        return list(self.stacked_buffers.values())

    @torch.no_grad()
    def copy_to(self, k: int, module: nn.Module) -> None:
        """Write seed k's parameters and buffers into `module`, its own."""
        for name, param in module.named_parameters():
            param.copy_(self.params[name][k])
        for name, buffer in module.named_buffers():
            buffer.copy_(self.stacked_buffers[name][k])

    @torch.no_grad()
    def copy_from(self, k: int, module: nn.Module) -> None:
        """Load seed k's parameters and buffers from `module`, its own."""
        for name, param in module.named_parameters():
            self.params[name][k].copy_(param)
        for name, buffer in module.named_buffers():
            self.stacked_buffers[name][k].copy_(buffer)


def _linear_weights(module: nn.Module) -> set[str]:
    """The names of `module`'s `nn.Linear` weights (`[out, in]` each)."""
    return {f"{name}.weight" if name else "weight" for name, layer in module.named_modules()
            if isinstance(layer, nn.Linear)}


def stack_seeds(tensors: list[torch.Tensor], transposed: bool) -> torch.Tensor:
    """`[S, *shape]`; with `transposed`, `[S, out, in]` laid out in memory as `[S, in, out]`.

    `_linear` multiplies by `W.transpose(1, 2)`, whose gradient is `xᵀ g`, `[S, in, out]`
    contiguous. Autograd hands a leaf a gradient with the leaf's own strides, so with `[S, out,
    in]` strides it copied every Linear weight's gradient into the transposed layout after each
    backward: ~2 ms per `[8, 256, 256]` weight, 12% of an 8-seed DQN batch's op time. Stored
    this way the gradient is already in place; shapes, indexing and `copy_to` are unchanged.
    Weights with fewer outputs than inputs are not transposed: see `_linear`.
    """
    stacked = torch.stack(tensors)
    if transposed and not narrow_output(stacked):
        return stacked.transpose(1, 2).contiguous().transpose(1, 2)
    return stacked


def narrow_output(weight: torch.Tensor) -> bool:
    """Whether a stacked Linear weight `[S, out, in]` has fewer outputs than inputs (a policy,
    value or Q head): `_linear` computes those as `W xᵀ`, with `W` kept `[S, out, in]`."""
    return weight.shape[-2] < weight.shape[-1]


class StackedActorCritic(Stacked):
    """S `ActorCritic`s; observations `[S, B, obs_dim]`."""

    def __init__(self, policies: list[ActorCritic]):
        super().__init__(policies)
        head = self.template.head
        self.gaussian = isinstance(head, GaussianHead)
        self.log_std_bounds = (head.log_std_min, head.log_std_max) if self.gaussian else None

    def dist(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
             ) -> CategoricalDist | DiagGaussianDist:
        """The action distributions at `obs` (batch shape `[S, B]`); `mask` `[S, B, n]`: each
        seed's valid actions (Discrete only)."""
        w = self.params
        features = _sequential(w, "actor_body", self.template.actor_body, obs.flatten(2))
        if not self.gaussian:
            return CategoricalDist(_linear(w, "head.logits", features), mask)
        low, high = self.log_std_bounds  # type: ignore[misc]
        log_std = w["head.log_std"].clamp(low, high).unsqueeze(1)  # [S, 1, A]
        return DiagGaussianDist(_linear(w, "head.mean", features), log_std)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) `[S, B]`."""
        return _sequential(self.params, "critic", self.template.critic, obs.flatten(2)).squeeze(-1)

    def dist_value(self, obs: torch.Tensor, mask: torch.Tensor | None = None,
                   ) -> tuple[CategoricalDist | DiagGaussianDist, torch.Tensor]:
        return self.dist(obs, mask), self.value(obs)


class StackedQ(Stacked):
    """S `QNetwork`s (plain or dueling head); `forward(obs [S, B, ...])` is Q `[S, B, n]`."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        w = self.params
        features = _sequential(w, "body", self.template.body, obs.flatten(2))
        if isinstance(self.template.head, DuelingHead):
            return dueling_aggregate(_linear(w, "head.value", features),
                                     _linear(w, "head.advantage", features))
        return _linear(w, "head", features)

    __call__ = forward


class StackedActor(Stacked):
    """S `SquashedGaussianActor`s (SAC's); `forward(obs [S, B, ...], noise [S, B, A])` is
    (tanh(u) [S, B, A], log π [S, B]) with u = μ + σ · noise (the reparameterized sample)."""

    def forward(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w, actor = self.params, self.template
        h = _sequential(w, "body", actor.body, obs.flatten(2))
        mean = _linear(w, "mean", h)
        log_std = _linear(w, "log_std", h).clamp(actor.log_std_min, actor.log_std_max)
        u = mean + log_std.exp() * noise
        return torch.tanh(u), squashed_gaussian_log_prob(u, mean, log_std)

    __call__ = forward


class StackedDeterministicActor(Stacked):
    """S `DeterministicActor`s (DDPG's, TD3's): `forward(obs [S, B, ...])` is tanh(MLP) `[S, B, A]`."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(_sequential(self.params, "net", self.template.net, obs.flatten(2)))

    __call__ = forward


class StackedEnsembleQ(Stacked):
    """S `QEnsemble`s of n critics each (SAC's and TD3's `TwinQ`); `forward(obs, action)` is
    Q `[S, n, B]` (`[S, n, B, outputs]` with several outputs per action). Each seed's members
    are its own `[n, ...]` block of one `[S * n, ...]` bmm."""

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        seeds, n = self.seeds, self.template.n
        x = torch.cat([obs.flatten(2), action], dim=-1)  # [S, B, F + A]
        x = x.unsqueeze(1).expand(-1, n, -1, -1).reshape(seeds * n, x.shape[1], x.shape[2])
        for name, layer in self.template.net.named_children():
            if isinstance(layer, EnsembleLinear):
                weight, bias = self.params[f"net.{name}.weight"], self.params[f"net.{name}.bias"]
                x = ensemble_linear(x, weight.flatten(0, 1), bias.flatten(0, 1))
            elif isinstance(layer, EnsembleLayerNorm):
                weight, bias = self.params[f"net.{name}.weight"], self.params[f"net.{name}.bias"]
                x = torch.addcmul(bias.flatten(0, 1), nn.functional.layer_norm(x, (layer.dim,)),
                                  weight.flatten(0, 1))
            else:
                x = layer(x)
        x = x.view(seeds, n, *x.shape[1:])
        return x.squeeze(-1) if self.template.outputs == 1 else x

    __call__ = forward


def _sequential(w: Weights, prefix: str, seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """`seq` (Linear, LayerNorm and activation layers) applied seed by seed, in one pass."""
    for name, layer in seq.named_children():
        if isinstance(layer, nn.Linear):
            x = _linear(w, f"{prefix}.{name}", x)
        elif isinstance(layer, nn.LayerNorm):
            x = nn.functional.layer_norm(x, layer.normalized_shape, None, None, layer.eps)
            x = x * w[f"{prefix}.{name}.weight"].unsqueeze(1) + w[f"{prefix}.{name}.bias"].unsqueeze(1)
        elif isinstance(layer, nn.Tanh):  # `torch.tanh`, or its faster CPU form for large x
            x = tanh(x)
        else:  # an elementwise activation
            x = layer(x)
    return x


def _linear(w: Weights, name: str, x: torch.Tensor) -> torch.Tensor:
    """`x[k] @ W[k]ᵀ + b[k]` for every seed k: `[S, B, in]` -> `[S, B, out]`.

    A layer with fewer outputs than inputs (a head: 1 value, 2 logits) is `(W[k] x[k]ᵀ)ᵀ`, so
    that autograd's weight gradient is `gᵀ x` into `W`'s own `[S, out, in]` layout. MKL's batched
    products with a 1- or 2-wide output side are slow the other way round (8 seeds, 256 rows,
    64 inputs, one thread: forward and both gradients 380 -> 69 µs with 1 output, 328 -> 90 µs with
    2); with a narrow input side (a first layer) they are fast as they are, and the reverse slow.
    One output is a dot product per row, faster still through autograd (a PPO CartPole minibatch
    step of 8 seeds, forward and backward: 3.40 -> 3.35 ms with `W xᵀ` alone, 2.9-3.0 ms with
    both; whole 8-seed runs: PPO CartPole 100k 58.1 / 63.8 -> 53.6 / 56.4 s, SAC Pendulum 5k
    51.1 / 53.7 -> 45.0 / 50.7 s).
    """
    weight, bias = w[f"{name}.weight"], w[f"{name}.bias"]
    if narrow_output(weight) and weight.shape[1] > 1:  # a transposed [S, B, out] view
        return torch.baddbmm(bias.unsqueeze(-1), weight, x.transpose(1, 2)).transpose(1, 2)
    # one output (a value): `ensemble_linear`'s dot product per row; else `x Wᵀ + b`
    return ensemble_linear(x, weight.transpose(1, 2), bias.unsqueeze(1))
