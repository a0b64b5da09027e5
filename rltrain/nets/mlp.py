"""Multi-layer perceptrons and weight initialization."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

from rltrain.errors import UserError

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
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
) -> nn.Sequential:
    """Linear/activation stack; `out_dim=None` ends after the last hidden activation.

    With `ortho`, hidden layers get orthogonal init with gain sqrt(2) and the output layer
    `out_gain` (the PPO implementation detail from Engstrom et al. 2020); biases are zero.
    """
    act_cls = activation(act)
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [_init(nn.Linear(last, width), math.sqrt(2), ortho), act_cls()]
        last = width
    if out_dim is not None:
        layers.append(_init(nn.Linear(last, out_dim), out_gain, ortho))
    return nn.Sequential(*layers)


def _init(layer: nn.Linear, gain: float, ortho: bool) -> nn.Linear:
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer
