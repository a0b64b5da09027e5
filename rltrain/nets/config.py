"""`NetConfig`: the network settings every algorithm shares (`net.*` on the command line).

It lives in each algorithm's config as `algo.net`, because an algorithm is built from its own
config alone (`build(cfg.algo, env_spec, device)`); `net.hidden=...` on the command line is
shorthand for `algo.net.hidden=...` (see `rltrain.config.overrides.net_overrides`). Unset fields
(None) keep the algorithm's own choice: `algo.hidden_sizes`, `algo.activation`, and its usual
initialization. `rltrain/nets/spec.py` turns them into the concrete layers of each network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltrain.errors import UserError

ENCODERS = ("auto", "cnn", "flatten")
ACTIVATION_NAMES = ("tanh", "relu", "elu", "gelu", "silu")
"""Hidden activations by name (`nets/mlp.py` maps each to its torch module)."""
RECURRENT_CORES = ("lstm", "gru")
"""`algo.recurrent` cores by name (`nets/recurrent.py` maps each to its torch module)."""
MAX_WIDTH = 16_384
"""The widest layer (hidden width, CNN channels or features) rltrain builds: one 16,384-wide
hidden-to-hidden layer already holds 268M weights (1 GiB in float32), far beyond RL's usual 64
to 1,024; a wider one is a typo, or a checkpoint that would make rltrain allocate gigabytes."""
MAX_ONE_HOT = 65_536
"""The most one-hot inputs categorical observations may give a network (the sum of their
`Discrete` sizes / `MultiDiscrete` nvec): the first layer holds that many rows. Taxi's 500
states are far below; a `Discrete(10**7)` would make each 64-wide first layer 640M weights
(2.4 GiB in float32, ~24 GiB with the critic, gradients and Adam's moments: the kernel kills
the process). An observation that large wants an embedding or features, not a one-hot."""


@dataclass
class NetConfig:
    """Network architecture: widths, activation, layer norm, initialization, image encoder."""

    hidden: list[int] | None = None
    """Hidden layer widths of every MLP (null: the algorithm's `algo.hidden_sizes`)."""
    activation: str | None = None
    """Hidden activation: tanh, relu, elu, gelu or silu (null: the algorithm's `algo.activation`)."""
    actor_hidden: list[int] | None = None
    """Widths of the policy network only (PPO/A2C actor, DDPG/TD3/SAC actor); null: `hidden`."""
    critic_hidden: list[int] | None = None
    """Widths of the value and Q networks only (PPO/A2C critic, each twin critic, DQN's
    Q-network); null: `hidden`."""
    layer_norm: bool = False
    """LayerNorm after each hidden Linear, before its activation (per member in twin critics);
    PQN's config sets it true (its Q-network is CleanRL's, normalized)."""
    ortho_init: bool | None = None
    """Orthogonal init (gain √2 hidden, 0.01 policy outputs, 1 value outputs; zero biases).
    null: each algorithm's default, i.e. `algo.ortho_init` for PPO/A2C (true) and PyTorch's
    default init for DQN, DDPG, TD3 and SAC. PPO/A2C action heads are orthogonal (0.01) always."""
    encoder: str = "auto"
    """Observation encoder: auto (a CNN for 3-D image observations, flatten otherwise), cnn, or
    flatten (an MLP on the flattened observation, whatever its shape)."""
    encoders: dict[str, str] = field(default_factory=dict)
    """Dict / Tuple observations: the encoder of each entry by key (auto, cnn or flatten),
    e.g. `+algo.net.encoders.camera=flatten`; entries not named take `encoder`. Categorical
    entries are always one-hot. The start of a run prints which encoder each entry got."""
    cnn_channels: list[int] = field(default_factory=lambda: [32, 64, 64])
    """Output channels of the three convolutions of the Nature-DQN encoder (8x8 stride 4,
    4x4 stride 2, 3x3 stride 1)."""
    cnn_features: int = 512
    """Width of the Linear + ReLU layer after the convolutions: the features the MLPs receive."""
    share_encoder: bool = False
    """PPO/A2C: one encoder (the CNN for images) feeds both the actor and the critic and is
    trained by both losses, as in SB3's CnnPolicy and CleanRL's Atari PPO; half the convolution
    work per step. false: each has its own. The Atari presets set it; off-policy algorithms refuse it
    (DQN has one network; DDPG/TD3/SAC train actor and critic on separate losses)."""


def check_net(algo: Any) -> None:
    """Raise a one-line `UserError` for a bad network setting of `algo` (its `net` and the
    `hidden_sizes` / `activation` defaults that `net` leaves in place)."""
    net: NetConfig = algo.net
    name, value = ("net.activation", net.activation) if net.activation is not None else (
        "algo.activation", algo.activation)
    if value not in ACTIVATION_NAMES:
        raise UserError(f"{name}={value!r}: choose one of {', '.join(ACTIVATION_NAMES)}")
    if any(w <= 0 for w in algo.hidden_sizes):  # [] stays allowed here: a linear model
        raise UserError(f"algo.hidden_sizes={list(algo.hidden_sizes)}: layer widths must be > 0")
    widths = {"net.hidden": net.hidden, "net.actor_hidden": net.actor_hidden,
              "net.critic_hidden": net.critic_hidden}
    for key, sizes in widths.items():
        if sizes is not None and (not sizes or any(w <= 0 for w in sizes)):
            raise UserError(f"{key}={list(sizes)}: give one or more layer widths > 0, "
                            f"e.g. [64, 64] (null: the algorithm's algo.hidden_sizes)")
    sized = {"algo.hidden_sizes": algo.hidden_sizes, **widths, "net.cnn_channels":
             net.cnn_channels, "net.cnn_features": [net.cnn_features]}
    for key, sizes in sized.items():
        if sizes is not None and any(w > MAX_WIDTH for w in sizes):
            shown = sizes[0] if key == "net.cnn_features" else list(sizes)
            raise UserError(f"{key}={shown}: layer widths are at most {MAX_WIDTH:,} "
                            f"(rltrain.nets.config.MAX_WIDTH)")
    if net.encoder not in ENCODERS:
        raise UserError(f"net.encoder={net.encoder!r}: choose one of {', '.join(ENCODERS)}")
    for key, encoder in net.encoders.items():
        if encoder not in ENCODERS:
            raise UserError(f"net.encoders.{key}={encoder!r}: choose one of {', '.join(ENCODERS)}")
    if len(net.cnn_channels) != 3 or any(c <= 0 for c in net.cnn_channels):
        raise UserError(f"net.cnn_channels={list(net.cnn_channels)}: give three channel counts "
                        f"> 0 (one per convolution), e.g. [32, 64, 64]")
    if net.cnn_features <= 0:
        raise UserError(f"net.cnn_features={net.cnn_features} must be > 0")
