"""ARS's policy (SB3-contrib's `ARSPolicy`): a deterministic linear map or MLP from observations
to actions, whose weights are searched directly rather than trained by gradients, and its
forward with other weights on each row (every env row runs its own perturbed copy)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from rltrain.errors import UserError
from rltrain.nets.encoder import encode, make_encoder
from rltrain.nets.mlp import mlp
from rltrain.nets.spec import NetSpec
from rltrain.types import EnvSpec


def check_no_cnn(encoder: nn.Module | None) -> None:
    """Refuse, in one line, an observation encoder with weights (the CNN of image observations
    or entries): SB3-contrib's ARS has linear and MLP policies only, on flattened inputs."""
    if encoder is not None and any(True for _ in encoder.parameters()):
        raise UserError("ars has a linear or MLP policy and no CNN, and these observations "
                        "would get one: set net.encoder=flatten (for a Dict / Tuple entry, "
                        "+algo.net.encoders.<key>=flatten) to feed the pixels to it as they are")


class ARSPolicy(nn.Module):
    """θ as a network: with no hidden widths one `Linear` without bias (SB3-contrib's
    `LinearPolicy`), else an MLP with biases and tanh on Box outputs (its `MlpPolicy`).
    Box actions come out in rltrain's [-1, 1] units (the env adapter clips and rescales them);
    Discrete actions are the argmax of the outputs."""

    def __init__(self, net: NetSpec, spec: EnvSpec):
        super().__init__()
        self.discrete = spec.action_kind == "discrete"
        self.encoder, width = make_encoder(net)  # flatten, one-hot, a Dict's entries side by side
        check_no_cnn(self.encoder)
        if net.hidden:
            self.body = mlp(width, net.hidden, spec.action_dim, net.activation, ortho=net.ortho,
                            layer_norm=net.layer_norm)
        else:
            self.body = nn.Sequential(nn.Linear(width, spec.action_dim, bias=False))
        self.squash = bool(net.hidden) and not self.discrete
        self.shapes = [p.shape for p in self.parameters()]
        """The shape of each parameter, in the order of the flat vector θ."""

    @property
    def size(self) -> int:
        """P, the number of weights in θ."""
        return sum(shape.numel() for shape in self.shapes)

    def act(self, obs: torch.Tensor, deterministic: bool = True,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Actions `[B, ...]` of θ itself (ARS's policy is deterministic: `deterministic` is
        accepted for the common signature); `action_mask` [B, n]: argmax over valid actions."""
        return self.output(self.body(encode(self.encoder, obs)), action_mask)

    def act_rows(self, obs: torch.Tensor, weights: torch.Tensor,
                 action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Actions `[N, ...]` where row i acts with the flat weights `weights[i]` (`[N, P]`, laid
        out as `torch.nn.utils.parameters_to_vector` lays out this module's parameters)."""
        x = encode(self.encoder, obs)
        rows = self.row_parameters(weights)
        for module in self.body:
            if isinstance(module, nn.Linear):
                x = torch.bmm(next(rows), x.unsqueeze(-1)).squeeze(-1)
                if module.bias is not None:
                    x = x + next(rows)
            elif isinstance(module, nn.LayerNorm):
                x = F.layer_norm(x, module.normalized_shape, eps=module.eps)
                x = x * next(rows) + next(rows)
            else:  # an activation
                x = module(x)
        return self.output(x, action_mask)

    def row_parameters(self, weights: torch.Tensor) -> Iterator[torch.Tensor]:
        """Each parameter `[N, *shape]` of the rows' flat weights `[N, P]`, in module order."""
        start = 0
        for shape in self.shapes:
            end = start + shape.numel()
            yield weights[:, start:end].view(weights.shape[0], *shape)
            start = end

    def output(self, y: torch.Tensor, action_mask: torch.Tensor | None) -> torch.Tensor:
        """The network's outputs as actions: argmax (among valid actions), tanh or as they are."""
        if self.discrete:
            if action_mask is not None:
                y = y.masked_fill(~action_mask, float("-inf"))
            return y.argmax(-1)
        return torch.tanh(y) if self.squash else y
