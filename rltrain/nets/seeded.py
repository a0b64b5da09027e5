"""A network of S seeds: the `nets/` classes themselves, with every layer's parameters stacked
`[S, ...]`, so their own forward passes run all seeds at once on inputs `[S, B, ...]`.

`stack_modules(members)` copies the first member's structure and swaps each `nn.Linear`,
`nn.LayerNorm`, `EnsembleLinear` and `EnsembleLayerNorm` for its seed form below, holding the
members' tensors stacked; free parameters (a Gaussian head's log σ) are stacked as they are.
Parameter names stay the members' (`actor_body.0.weight` is `[S, 64, 4]`), so seed k's state is
`tensor[k]` under the same key (`member_state`), and a seed's checkpoint is its single run's.

A `Linear` of seed k is `x[k] @ W[k]ᵀ + b[k]`; for all seeds that is one `baddbmm` over
`[S, B, in]`. Activations and the distributions of `nets/heads.py` act on the last dimension, so
they take the leading seed dimension as they are. Seeds share no parameter: the gradient of a
sum of per-seed losses gives each seed exactly its own gradient.

Not bit for bit a single run's: the hidden layers' forward matched `nn.Linear` per slice exactly
here (the heads are summed another way, `seed_linear`), but the backward of a 4-input first
layer differed by ~6e-9 (the weight gradient is summed in another order), and reductions over
`[S, B]` along B differ from those over `[B]` in the last bit, by an amount that depends on the
CPU's kernels. Training amplifies such differences once one crosses a threshold (a ratio at
PPO's clip, an action at its bound): a seed in a batch starts from its single run's weights and
streams, stays close to it for its first updates (measured 2026-11-27 under four kernel
settings: PPO CartPole 9 updates within 1e-5, SAC Pendulum 83 gradient steps, TD3 164), then
follows its own trajectory of the same distribution (tests/seed_batch/test_equivalence.py,
benchmarks/seed_batch.py).
"""

from __future__ import annotations

import copy
import weakref
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from rltrain.errors import UserError
from rltrain.nets.continuous import EnsembleLayerNorm, EnsembleLinear, ensemble_linear
from rltrain.nets.heads import CategoricalHead, GaussianHead, PolicyHead
from rltrain.nets.mlp import ACTIVATIONS
from rltrain.nets.sde import StateDependentNoise

_TEMPLATES: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()
"""A stacked network -> one member's structure (not a part of the network: no parameters of it
are trained or saved), from which `seed_view` builds a seed's own module."""

_LAYERS = (nn.Linear, nn.LayerNorm, EnsembleLinear, EnsembleLayerNorm, *ACTIVATIONS.values())


class NotStackable(UserError):
    """The seeds' networks cannot run stacked: `what` says which part (the batch then runs each
    seed's own member in turn, `runner/members.py`)."""

    def __init__(self, what: str):
        super().__init__(f"num_seeds > 1 cannot stack {what} yet; use num_seeds=1")
        self.what = what


def check_stackable(net: nn.Module) -> None:
    """Refuse, in one line, a network the batch cannot run. What it can: any network whose
    layers with parameters are `Linear`, `LayerNorm` or the ensemble forms of `nets/continuous`
    (with any activations between them and free parameters such as a Gaussian head's log σ), on
    vector observations, whose forward reads its inputs' last dimension (the `nets/` classes
    do); an actor-critic's head categorical or Gaussian (what a seed's noise is drawn for)."""
    if getattr(net, "shared", False):
        raise NotStackable("a shared encoder (net.share_encoder)")
    if any(name.endswith("encoder") and value is not None for name, value in vars(net).items()) \
            or any(name.endswith("encoder") for name, _ in net.named_children()):
        raise NotStackable("an observation encoder (images, Dict or categorical observations)")
    if getattr(net, "sde", None) is not None or any(
            isinstance(m, StateDependentNoise) for m in net.modules()):
        raise NotStackable("gSDE (algo.use_sde)")
    head = getattr(net, "head", None)
    if isinstance(head, PolicyHead) and type(head) not in (CategoricalHead, GaussianHead):
        raise NotStackable(f"a {type(head).__name__} (MultiDiscrete, MultiBinary or gSDE "
                           "actions)")
    for layer in net.modules():
        if isinstance(layer, nn.RNNBase):
            raise NotStackable(f"a {type(layer).__name__} (a recurrent core)")
        holds = any(True for _ in layer.parameters(recurse=False)) or \
            any(True for _ in layer.buffers(recurse=False))
        if holds and not isinstance(layer, _LAYERS) and _is_leaf_layer(layer):
            raise NotStackable(f"a {type(layer).__name__} layer")


def _is_leaf_layer(layer: nn.Module) -> bool:
    """A module with no children: a layer (a module with children may hold a free parameter,
    such as a Gaussian head's log σ, which is stacked as it is)."""
    return not any(True for _ in layer.children())


def flatten_seeds(obs: torch.Tensor) -> torch.Tensor:
    """The encoder of vector observations in a stacked network: `[S, B, *obs_shape]` ->
    `[S, B, F]` (a single network's `encode` flattens from dimension 1 without a module; a
    plain function here too, called by `encode` as an encoder is)."""
    return obs.flatten(2) if obs.dtype != torch.uint8 else obs.flatten(2).float()


class SeedSequential(nn.Sequential):
    """A stacked network's `nn.Sequential`: its layers' `forward` called directly, without
    `nn.Module.__call__`'s machinery per layer (hooks are not used on a stacked network); an
    8-seed PPO actor-critic's acting forward took 130 µs through the layers' calls, ~100 µs
    as the hand-written stacked forward it replaced."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = layer.forward(x)
        return x


class SeedLinear(nn.Module):
    """S `nn.Linear`s: `weight` `[S, out, in]` (laid out by `stack_seeds`), `bias` `[S, out]`."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight, self.bias = nn.Parameter(weight), nn.Parameter(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.shape[0] == 1:  # a batch of one: a single run's kernel, bit for bit
            return F.linear(x[0], self.weight[0], self.bias[0]).unsqueeze(0)
        return seed_linear(x, self.weight, self.bias)


class SeedLayerNorm(nn.Module):
    """S `nn.LayerNorm`s over the last dimension: `weight`, `bias` `[S, dim]`."""

    def __init__(self, layer: nn.LayerNorm, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.normalized_shape, self.eps = tuple(layer.normalized_shape), layer.eps
        self.weight, self.bias = nn.Parameter(weight), nn.Parameter(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.shape[0] == 1:  # a batch of one: a single run's kernel, bit for bit
            return F.layer_norm(x[0], self.normalized_shape, self.weight[0], self.bias[0],
                                self.eps).unsqueeze(0)
        x = F.layer_norm(x, self.normalized_shape, None, None, self.eps)
        return x * self.weight.unsqueeze(1) + self.bias.unsqueeze(1)


class SeedEnsembleLinear(nn.Module):
    """S `EnsembleLinear`s of n members: `weight` `[S, n, in, out]`, `bias` `[S, n, 1, out]`;
    inputs `[S * n, B, in]` (each seed's members one block of one batched product)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight, self.bias = nn.Parameter(weight), nn.Parameter(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ensemble_linear(x, self.weight.flatten(0, 1), self.bias.flatten(0, 1))


class SeedEnsembleLayerNorm(nn.Module):
    """S `EnsembleLayerNorm`s: `weight`, `bias` `[S, n, 1, dim]`; inputs `[S * n, B, dim]`."""

    def __init__(self, layer: EnsembleLayerNorm, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.dim = layer.dim
        self.weight, self.bias = nn.Parameter(weight), nn.Parameter(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias.flatten(0, 1), F.layer_norm(x, (self.dim,)),
                             self.weight.flatten(0, 1))


def stack_modules(members: list[nn.Module], requires_grad: bool = True) -> nn.Module:
    """One network of the members' class whose parameters are theirs stacked `[S, ...]` (new
    leaf tensors: `copy_to` writes seed k's back, `copy_from` reads them); its forward passes
    take inputs `[S, B, ...]`. NotStackable where a part cannot run stacked."""
    for member in members:
        check_stackable(member)
    stacked = copy.deepcopy(members[0])
    stacked.seeds = len(members)
    _TEMPLATES[stacked] = copy.deepcopy(members[0])  # a seed's own structure, for `seed_view`
    per_seed = [dict(m.named_modules()) for m in members]
    for name, layer in list(stacked.named_modules()):
        seed_form = _seed_form(layer, [modules[name] for modules in per_seed])
        if seed_form is not None:
            _replace(stacked, name, seed_form)
    for name, value in list(vars(stacked).items()):
        if name.endswith("encoder") and value is None:  # vector observations: [S, B, ...]
            object.__setattr__(stacked, name, flatten_seeds)
    for module in stacked.modules():
        if type(module) is nn.Sequential:
            module.__class__ = SeedSequential
    _stack_free_tensors(stacked, members)
    stacked.requires_grad_(requires_grad)
    return stacked


def _stack_free_tensors(stacked: nn.Module, members: list[nn.Module]) -> None:
    """Stack the members' parameters outside the seed-form layers (a Gaussian head's log σ)
    and their buffers (BatchNorm statistics) into `stacked`, under the same names."""
    seeded = _seeded_prefixes(stacked)
    params = [dict(m.named_parameters()) for m in members]
    for name in [n for n, _ in stacked.named_parameters() if not n.startswith(seeded)]:
        owner, _, leaf = name.rpartition(".")
        value = nn.Parameter(torch.stack([p[name].detach() for p in params]))
        setattr(stacked.get_submodule(owner), leaf, value)
    buffers = [dict(m.named_buffers()) for m in members]
    for name in [n for n, _ in stacked.named_buffers()]:
        owner, _, leaf = name.rpartition(".")
        stacked.get_submodule(owner).register_buffer(leaf, torch.stack([b[name] for b in buffers]))


def _seed_form(layer: nn.Module, layers: list[nn.Module]) -> nn.Module | None:
    """The seed form of `layer` holding `layers`' tensors stacked, or None (kept as it is)."""
    if isinstance(layer, nn.Linear):
        weight = stack_seeds([m.weight.detach() for m in layers], transposed=True)
        return SeedLinear(weight, torch.stack([m.bias.detach() for m in layers]))
    forms = {nn.LayerNorm: SeedLayerNorm, EnsembleLinear: SeedEnsembleLinear,
             EnsembleLayerNorm: SeedEnsembleLayerNorm}
    form = next((f for kind, f in forms.items() if isinstance(layer, kind)), None)
    if form is None:
        return None
    weight = torch.stack([m.weight.detach() for m in layers])
    bias = torch.stack([m.bias.detach() for m in layers])
    return form(weight, bias) if form is SeedEnsembleLinear else form(layer, weight, bias)


_SEED_LAYERS = (SeedLinear, SeedLayerNorm, SeedEnsembleLinear, SeedEnsembleLayerNorm)


def _seeded_prefixes(stacked: nn.Module) -> tuple[str, ...]:
    """The parameter-name prefixes of the layers already in seed form."""
    return tuple(f"{name}." for name, m in stacked.named_modules() if isinstance(m, _SEED_LAYERS))


def _replace(root: nn.Module, name: str, layer: nn.Module) -> None:
    owner, _, leaf = name.rpartition(".")
    setattr(root.get_submodule(owner) if owner else root, leaf, layer)


def seed_view(stacked: nn.Module, k: int) -> nn.Module:
    """Seed k's network as its single run's module whose parameters and buffers share memory
    with `stacked`'s slices `[k]`: it reads the batch's current weights with no copy (its
    evaluation, a check of its weights), trains nothing (no gradients), and its `state_dict()`
    holds contiguous copies, as a single run's checkpoint does."""
    view = copy.deepcopy(_TEMPLATES[stacked])
    params, buffers = dict(stacked.named_parameters()), dict(stacked.named_buffers())
    for name, _ in list(view.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        setattr(view.get_submodule(owner), leaf,
                nn.Parameter(params[name].detach()[k], requires_grad=False))
    for name, _ in list(view.named_buffers()):
        owner, _, leaf = name.rpartition(".")
        view.get_submodule(owner).register_buffer(leaf, buffers[name][k])
    view.register_state_dict_post_hook(_own_copies)
    return view


def _own_copies(module: nn.Module, state: dict, prefix: str, local_metadata: Any) -> None:
    """A seed view's `state_dict()` holds copies of its slices (saving a view of the stacked
    tensor would save every seed's memory), each laid out as a single run's."""
    for key, value in state.items():
        state[key] = value.clone(memory_format=torch.contiguous_format)


@torch.no_grad()
def copy_to(stacked: nn.Module, k: int, module: nn.Module) -> None:
    """Write seed k's parameters and buffers into `module`, its own."""
    params, buffers = dict(stacked.named_parameters()), dict(stacked.named_buffers())
    for name, param in module.named_parameters():
        param.copy_(params[name][k])
    for name, buffer in module.named_buffers():
        buffer.copy_(buffers[name][k])


@torch.no_grad()
def copy_from(stacked: nn.Module, k: int, module: nn.Module) -> None:
    """Load seed k's parameters and buffers from `module`, its own."""
    params, buffers = dict(stacked.named_parameters()), dict(stacked.named_buffers())
    for name, param in module.named_parameters():
        params[name][k].copy_(param)
    for name, buffer in module.named_buffers():
        buffers[name][k].copy_(buffer)


def stack_seeds(tensors: list[torch.Tensor], transposed: bool) -> torch.Tensor:
    """`[S, *shape]`; with `transposed`, `[S, out, in]` laid out in memory as `[S, in, out]`.

    `seed_linear` multiplies by `W.transpose(1, 2)`, whose gradient is `xᵀ g`, `[S, in, out]`
    contiguous. Autograd hands a leaf a gradient with the leaf's own strides, so with `[S, out,
    in]` strides it copied every Linear weight's gradient into the transposed layout after each
    backward: ~2 ms per `[8, 256, 256]` weight, 12% of an 8-seed DQN batch's op time. Stored
    this way the gradient is already in place; shapes, indexing and `copy_to` are unchanged.
    Weights with fewer outputs than inputs are not transposed: see `seed_linear`.
    """
    stacked = torch.stack(tensors)
    if transposed and len(tensors) > 1 and not narrow_output(stacked):  # one: F.linear's layout
        return stacked.transpose(1, 2).contiguous().transpose(1, 2)
    return stacked


def narrow_output(weight: torch.Tensor) -> bool:
    """Whether a stacked Linear weight `[S, out, in]` has fewer outputs than inputs (a policy,
    value or Q head): `seed_linear` computes those as `W xᵀ`, with `W` kept `[S, out, in]`."""
    return weight.shape[-2] < weight.shape[-1]


def seed_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
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
    if narrow_output(weight) and weight.shape[1] > 1:  # a transposed [S, B, out] view
        return torch.baddbmm(bias.unsqueeze(-1), weight, x.transpose(1, 2)).transpose(1, 2)
    # one output (a value): `ensemble_linear`'s dot product per row; else `x Wᵀ + b`
    return ensemble_linear(x, weight.transpose(1, 2), bias.unsqueeze(1))
