"""From config to layers: the one place where `algo.net`, the algorithm's own defaults and the
env's observation space become the concrete settings each network is built from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from rltrain.errors import UserError
from rltrain.nets.config import NetConfig

if TYPE_CHECKING:
    from rltrain.types import EnvSpec, ObsEntry


class NetSettings(Protocol):
    """What `resolve_nets` reads of an algorithm's config (any `AlgoConfig` has these)."""

    net: NetConfig
    hidden_sizes: list[int]
    activation: str


@dataclass(frozen=True)
class NetSpec:
    """What one network is built from: its input, widths, activation, normalization, init."""

    obs_shape: tuple[int, ...]
    hidden: tuple[int, ...]
    activation: str = "relu"
    layer_norm: bool = False
    ortho: bool = False
    image: bool = False  # observations go through the CNN encoder (nets/encoder.py)
    pixels: bool = False  # uint8 pixels: the encoder divides by 255
    cnn_channels: tuple[int, ...] = (32, 64, 64)
    cnn_features: int = 512
    obs_nvec: tuple[int, ...] = ()  # categorical observations: one-hot per entry (EnvSpec.obs_nvec)
    entries: tuple[tuple[str, NetSpec], ...] = ()
    """Dict / Tuple observations: (key, the entry's own input settings), one encoder each."""
    batch_renorm: tuple[float, int] | None = None
    """(momentum, warmup steps): a `BatchRenorm` (`nets/norm.py`) on the MLP's input and after
    each hidden activation (CrossQ's networks); None: none."""

    @property
    def obs_dim(self) -> int:
        """Flattened observation size."""
        return math.prod(self.obs_shape)


class ActorCriticSpecs(NamedTuple):
    """The policy network's settings and the value / Q network's settings."""

    actor: NetSpec
    critic: NetSpec


def resolve_nets(cfg: NetSettings, env: EnvSpec, ortho: bool = False) -> ActorCriticSpecs:
    """Settings of the actor and the critic: `cfg.net` where set, else the algorithm's
    `hidden_sizes` and `activation`, and `ortho` (the algorithm's own init default)."""
    net = cfg.net
    hidden = net.hidden if net.hidden is not None else cfg.hidden_sizes
    shape = tuple(env.obs_shape)
    common = {
        "obs_shape": shape,
        "activation": net.activation if net.activation is not None else cfg.activation,
        "layer_norm": net.layer_norm,
        "ortho": ortho if net.ortho_init is None else net.ortho_init,
        "cnn_channels": tuple(net.cnn_channels),
        "cnn_features": net.cnn_features,
    }
    entries = tuple(getattr(env, "obs_entries", ()))
    if entries:
        common["entries"] = _entry_specs(net, entries, common)
    else:
        common.update(
            image=uses_cnn(net.encoder, shape),
            # duck-typed envs (batched factories) may bring their own spec object without these
            pixels=bool(getattr(env, "pixels", False)),
            obs_nvec=tuple(getattr(env, "obs_nvec", ())))
        if net.encoders:
            raise UserError(f"net.encoders sets encoders per entry of Dict / Tuple observations; "
                            f"this env's are one {list(shape)} tensor (use net.encoder)")
    actor = net.actor_hidden if net.actor_hidden is not None else hidden
    critic = net.critic_hidden if net.critic_hidden is not None else hidden
    return ActorCriticSpecs(NetSpec(hidden=tuple(actor), **common),
                            NetSpec(hidden=tuple(critic), **common))


def _entry_specs(net: NetConfig, entries: tuple[ObsEntry, ...], common: dict,
                 ) -> tuple[tuple[str, NetSpec], ...]:
    """One input `NetSpec` per entry of a Dict / Tuple observation: `net.encoders[key]` where
    given, else `net.encoder` (auto: a CNN for 3-D entries)."""
    keys = [e.key for e in entries]
    unknown = sorted(set(net.encoders) - set(keys))
    if unknown:
        raise UserError(f"net.encoders names {', '.join(unknown)}, not an entry of this env's "
                        f"observations (entries: {', '.join(keys)})")
    out = []
    for e in entries:
        choice = net.encoders.get(e.key, net.encoder)
        if choice == "cnn" and (e.obs_nvec or len(e.obs_shape) != 3):
            given = (f"net.encoders.{e.key}=cnn" if e.key in net.encoders
                     else "net.encoder=cnn (for every entry not in net.encoders)")
            raise UserError(f"{given} needs an image entry ([H, W, C] or [C, H, W]); entry "
                            f"{e.key!r} is {'categorical' if e.obs_nvec else list(e.obs_shape)}"
                            f": set net.encoders.{e.key}=flatten")
        image = not e.obs_nvec and uses_cnn(choice, e.obs_shape)
        out.append((e.key, NetSpec(**{**common, "obs_shape": e.obs_shape}, hidden=(), image=image,
                                   pixels=e.pixels, obs_nvec=e.obs_nvec)))
    return tuple(out)


def uses_cnn(encoder: str, obs_shape: tuple[int, ...]) -> bool:
    """Whether `net.encoder` picks the CNN for observations of `obs_shape` (auto: 3-D ones)."""
    if encoder == "cnn" and len(obs_shape) != 3:
        raise UserError(f"net.encoder=cnn needs image observations ([H, W, C] or [C, H, W]); "
                        f"this env's have shape {list(obs_shape)}")
    return encoder == "cnn" or (encoder == "auto" and len(obs_shape) == 3)
