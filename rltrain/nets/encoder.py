"""Observation encoders: flatten vectors, one-hot categorical entries, a Nature-DQN CNN for images
(Mnih et al. 2015), and one of those per entry of Dict / Tuple observations."""

from __future__ import annotations

import torch
from torch import nn

from rltrain.errors import UserError
from rltrain.nets.config import MAX_ONE_HOT
from rltrain.nets.mlp import HIDDEN_GAIN
from rltrain.nets.spec import NetSpec
from rltrain.obs import Obs

MIN_IMAGE_SIZE = 36
"""Smallest height and width the three Nature-DQN convolutions leave a 1x1 map of."""


def make_encoder(spec: NetSpec) -> tuple[nn.Module | None, int]:
    """(encoder, F): a `NatureCNN` for images; `OneHot` for categorical observations; None for
    vectors, which `encode` flattens (no module, so MLP checkpoints keep their keys and the hot
    path its speed)."""
    check_one_hot(spec)
    if spec.entries:
        encoder = DictEncoder(spec)
        return encoder, encoder.features
    if spec.obs_nvec:
        return OneHot(spec.obs_nvec), sum(spec.obs_nvec)
    if not spec.image:
        return None, spec.obs_dim
    return NatureCNN(spec), spec.cnn_features


def one_hot_width(spec: NetSpec) -> int:
    """How many one-hot inputs the categorical observations (or entries) of `spec` give."""
    return sum(spec.obs_nvec) + sum(one_hot_width(sub) for _, sub in spec.entries)


def check_one_hot(spec: NetSpec) -> None:
    """Refuse (one line) categorical observations whose one-hot would exceed `MAX_ONE_HOT`
    inputs, before any layer is built: the first Linear would need gigabytes."""
    width = one_hot_width(spec)
    if width <= MAX_ONE_HOT:
        return
    spaces = [f"{key + ' ' if key else ''}{_space(sub.obs_nvec)}"
              for key, sub in (*spec.entries, ("", spec)) if sub.obs_nvec]
    raise UserError(f"categorical observations {', '.join(spaces)} would one-hot into "
                    f"{width:,} network inputs, more than {MAX_ONE_HOT:,} "
                    f"(rltrain.nets.config.MAX_ONE_HOT): the first layer alone would need "
                    f"gigabytes; give the env a Box observation instead (an embedding or "
                    f"features of the state: a gymnasium ObservationWrapper, listed in "
                    f"env.wrappers as module:Class)")


def _space(nvec: tuple[int, ...]) -> str:
    """`Discrete(n)` or `MultiDiscrete([...])` as the user's env declared it (roughly)."""
    if len(nvec) == 1:
        return f"Discrete({nvec[0]:,})"
    shown = ", ".join(map(str, nvec[:4])) + (", ..." if len(nvec) > 4 else "")
    return f"MultiDiscrete([{shown}])"


def encode(encoder: nn.Module | None, obs: Obs) -> torch.Tensor:
    """Features `[B, F]` of observations `[B, *obs_shape]` (see `make_encoder`).

    A plain `flatten` costs 0.3 µs where an `nn.Flatten` call costs 1.7 µs, on every forward.
    uint8 observations (pixels kept as bytes in buffers) become float here, on the device.
    """
    if encoder is not None:
        return encoder(obs)
    return obs.flatten(1) if obs.dtype != torch.uint8 else obs.flatten(1).float()


class OneHot(nn.Module):
    """Categorical observations `[B, k]` (entry i in [0, nvec[i])) -> concatenated one-hots
    `[B, sum(nvec)]`, float32, on the device: buffers keep the k integers (8 bytes each), not
    the one-hot floats (Taxi's 500 states: 8 bytes instead of 2,000). No parameters, no state."""

    def __init__(self, nvec: tuple[int, ...]):
        super().__init__()
        self.width = int(sum(nvec))
        offsets = torch.tensor([0, *nvec[:-1]], dtype=torch.long).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        index = obs.long().reshape(obs.shape[0], -1) + self.offsets
        out = torch.zeros(obs.shape[0], self.width, device=obs.device)
        return out.scatter_(1, index, 1.0)


class DictEncoder(nn.Module):
    """Dict / Tuple observations `{key: [B, ...]}`: each entry through its own encoder (see
    `make_encoder`: CNN, one-hot or flatten), the features concatenated in entry order, `[B, F]`
    (SB3's CombinedExtractor, without its extra layers: the MLP body follows)."""

    def __init__(self, spec: NetSpec):
        super().__init__()
        self.keys = [key for key, _ in spec.entries]
        built = [make_encoder(sub) for _, sub in spec.entries]
        # flatten entries have no module: None cannot sit in a ModuleDict, so only the others do
        self.names = [module_name(key) if enc is not None else None
                      for key, (enc, _) in zip(self.keys, built, strict=True)]
        named = [(n, k) for n, k in zip(self.names, self.keys, strict=True) if n is not None]
        clash = [k for n, k in named if [m for m, _ in named].count(n) > 1]
        if clash:
            raise UserError(f"observation entries {', '.join(map(repr, clash))} would share one "
                            f"encoder name; rename one of those keys in the env's space")
        self.encoders = nn.ModuleDict({n: enc for n, (enc, _) in zip(self.names, built,
                                                                      strict=True)
                                       if n is not None})
        self.widths = [width for _, width in built]
        self.features = sum(self.widths)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([encode(self.encoders[n] if n is not None else None, obs[k])
                          for k, n in zip(self.keys, self.names, strict=True)], dim=-1)


def module_name(key: str) -> str:
    """The name of entry `key`'s encoder in `DictEncoder.encoders`: the key itself, with each "."
    (a nested Dict / Tuple entry, "body.cue", or a key that holds one) written "/", because
    module names cannot hold dots (they join state_dict names), and with a leading "/" where
    the key is empty or an attribute of `nn.ModuleDict` ("type", "keys"), which it refuses."""
    name = key.replace(".", "/")
    return "/" + name if not name or hasattr(_PROBE, name) else name


_PROBE = nn.ModuleDict()  # what `module_name` asks which names `nn.ModuleDict` already holds


def describe(spec: NetSpec) -> list[str]:
    """One line per observation entry: its key, shape, dtype kind and the encoder it gets,
    e.g. "camera [64, 64, 3] uint8 -> cnn (512 features)"."""
    lines = []
    for key, sub in spec.entries:
        shape = list(sub.obs_shape)
        if sub.obs_nvec:
            lines.append(f"{key} {shape} categorical -> one-hot ({sum(sub.obs_nvec)} features)")
        elif sub.image:
            kind = "uint8" if sub.pixels else "float"
            lines.append(f"{key} {shape} {kind} -> cnn ({sub.cnn_features} features)")
        else:
            lines.append(f"{key} {shape} -> flatten ({sub.obs_dim} features)")
    return lines


def is_channels_last(shape: tuple[int, ...]) -> bool:
    """True for `[H, W, C]` images: the channel axis is the smaller end (ties: `[C, H, W]`)."""
    return shape[-1] < shape[0]


class NatureCNN(nn.Module):
    """Conv 8x8/4, 4x4/2, 3x3/1 (ReLU each), then Linear + ReLU to `cnn_features` features.

    Accepts `[B, H, W, C]` or `[B, C, H, W]` observations (see `is_channels_last`), uint8 or
    float: they become float32 here, on the device, and pixel values are divided by 255 first.
    """

    def __init__(self, spec: NetSpec):
        super().__init__()
        shape = spec.obs_shape
        self.channels_last = is_channels_last(shape)
        c, h, w = (shape[2], shape[0], shape[1]) if self.channels_last else shape
        if min(h, w) < MIN_IMAGE_SIZE:
            raise UserError(f"image observations {list(shape)} are too small for the CNN encoder "
                            f"(needs at least {MIN_IMAGE_SIZE}x{MIN_IMAGE_SIZE} pixels): use "
                            f"net.encoder=flatten")
        c1, c2, c3 = spec.cnn_channels
        self.convs = nn.Sequential(
            nn.Conv2d(c, c1, 8, stride=4), nn.ReLU(),
            nn.Conv2d(c1, c2, 4, stride=2), nn.ReLU(),
            nn.Conv2d(c2, c3, 3, stride=1), nn.ReLU(),
            nn.Flatten(1),
        )
        with torch.no_grad():
            n_flat = self.convs(torch.zeros(1, c, h, w)).shape[1]
        self.linear = nn.Linear(n_flat, spec.cnn_features)
        self.scale = 1.0 / 255.0 if spec.pixels else 1.0
        if spec.ortho:
            for layer in (*self.convs, self.linear):
                if isinstance(layer, (nn.Conv2d, nn.Linear)):
                    nn.init.orthogonal_(layer.weight, HIDDEN_GAIN)
                    nn.init.zeros_(layer.bias)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features `[B, cnn_features]`.

        On CPU the float images are laid out channels-last (NHWC strides, same logical shape):
        oneDNN's convolutions run faster on it. Measured here, 1 thread, Nature CNN on
        `[256, 4, 84, 84]`: forward + backward 147 ms against 203 ms, for a 3.5 ms copy. `[B, H,
        W, C]` observations are that layout already, so for them it is a no-op.
        """
        x = (obs.permute(0, 3, 1, 2) if self.channels_last else obs).float()
        if x.device.type == "cpu":
            x = x.contiguous(memory_format=torch.channels_last)
        if self.scale != 1.0:
            x = x * self.scale
        return torch.relu(self.linear(self.convs(x)))
