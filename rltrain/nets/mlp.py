"""Multi-layer perceptrons and weight initialization."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

from rltrain.errors import UserError
from rltrain.nets.activations import Tanh
from rltrain.nets.norm import batch_renorm as batch_renorm_layers

HIDDEN_GAIN = math.sqrt(2)
"""Orthogonal-init gain of hidden layers (SB3 and CleanRL use √2 whatever the activation)."""
POLICY_GAIN = 0.01
"""Orthogonal-init gain of policy outputs: near-uniform / near-zero initial actions."""

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": Tanh,  # torch.tanh, or its faster CPU form on large batches (nets/activations.py)
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}


def activation(name: str) -> type[nn.Module]:
    """The activation class for a config name."""
    if name not in ACTIVATIONS:
        raise UserError(f"unknown activation {name!r}: choose one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def mlp(
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int | None,
    act: str = "tanh",
    out_gain: float = 1.0,
    ortho: bool = True,
    layer_norm: bool = False,
    batch_renorm: tuple[float, int] | None = None,
) -> nn.Sequential:
    """Linear/activation stack; `out_dim=None` ends after the last hidden activation.

    With `ortho`, hidden layers get orthogonal init with gain sqrt(2) and the output layer
    `out_gain` (the PPO implementation detail from Engstrom et al. 2020); biases are zero.
    With `layer_norm`, each hidden Linear is followed by a LayerNorm before its activation.
    With `batch_renorm` (momentum, warmup steps), a `BatchRenorm` normalizes the input and each
    hidden activation's output (CrossQ's networks, as SBX's).
    """
    act_cls = activation(act)
    layers: list[nn.Module] = [*batch_renorm_layers(in_dim, batch_renorm)]
    last = in_dim
    for width in hidden:
        layers.append(init_linear(nn.Linear(last, width), HIDDEN_GAIN, ortho))
        if layer_norm:
            layers.append(nn.LayerNorm(width))
        layers.append(act_cls())
        layers.extend(batch_renorm_layers(width, batch_renorm))
        last = width
    if out_dim is not None:
        layers.append(init_linear(nn.Linear(last, out_dim), out_gain, ortho))
    return nn.Sequential(*layers)


def init_linear(layer: nn.Linear, gain: float, ortho: bool) -> nn.Linear:
    """Orthogonal weights with `gain` and zero bias when `ortho`; PyTorch's default otherwise."""
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer
