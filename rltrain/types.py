"""Typed values that flow between the env, the buffers, the algorithms and the loggers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

Metrics = dict[str, float]

CHOICE_KINDS = ("discrete", "multi_discrete", "multi_binary")
"""Action kinds with a finite set of choices: int64 actions, categorical / Bernoulli heads."""


@dataclass(frozen=True)
class ObsEntry:
    """One entry of a Dict or Tuple observation: its key (see `rltrain/obs.py`) and, as for a
    whole observation in `EnvSpec`, its shape, whether it is uint8 pixels and its categories."""

    key: str
    obs_shape: tuple[int, ...]
    pixels: bool = False
    obs_nvec: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        """"image" (3-D), "categorical" (one-hot in the network) or "vector"."""
        if self.obs_nvec:
            return "categorical"
        return "image" if len(self.obs_shape) == 3 else "vector"


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about an environment to build its networks."""

    obs_shape: tuple[int, ...]
    action_kind: str  # "discrete", "box", "multi_discrete" or "multi_binary"
    action_dim: int  # discrete: number of actions; box: vector size; multi_*: number of dimensions
    num_envs: int
    pixels: bool = False  # uint8 pixel observations (0..255, delivered as uint8): scaled by 1/255
    frame_stack: int = 0  # > 0: obs are [k, H, W] stacks of the last k frames, newest last
    action_nvec: tuple[int, ...] = ()
    """multi_discrete actions: the number of choices of each dimension (empty otherwise)."""
    obs_nvec: tuple[int, ...] = ()
    """Categorical observations (Discrete, MultiDiscrete, MultiBinary): obs are int64 `[k]`,
    entry i in [0, obs_nvec[i]); the networks one-hot them (`nets/encoder.py`). Empty: Box."""
    obs_entries: tuple[ObsEntry, ...] = ()
    """Dict / Tuple observations: obs are dicts `{entry.key: [N, *entry.obs_shape]}` and
    `obs_shape` is `()`. Empty: obs are one tensor `[N, *obs_shape]`."""

    @property
    def obs_dim(self) -> int:
        """Flattened observation size."""
        n = 1
        for d in self.obs_shape:
            n *= d
        return n


def action_shape(spec: EnvSpec) -> tuple[int, ...]:
    """One env's action: `()` for discrete (an index), `(action_dim,)` otherwise. (A function,
    not a property: batched envs of users may bring their own `EnvSpec`-like object.)"""
    return () if spec.action_kind == "discrete" else (spec.action_dim,)


def action_dtype(spec: EnvSpec) -> torch.dtype:
    """How actions are stored: indices (discrete, multi_discrete) as long, the rest float
    (MultiBinary's 0/1 as float, as the Bernoulli log-probability takes them)."""
    return torch.long if spec.action_kind in ("discrete", "multi_discrete") else torch.float32


@dataclass
class StepResult:
    """One batched env step, all tensors on the training device.

    `obs` is already the reset observation for rows whose episode ended; `final_obs` is the true
    next observation of every row (the last observation of an ended episode, `obs` otherwise).
    """

    obs: torch.Tensor  # [N, *obs_shape]
    reward: torch.Tensor  # [N] float32
    terminated: torch.Tensor  # [N] bool
    truncated: torch.Tensor  # [N] bool
    final_obs: torch.Tensor  # [N, *obs_shape]
    info: dict = field(default_factory=dict)


class RolloutBatch(NamedTuple):
    """A flattened on-policy batch; every tensor has leading dimension B = n_steps * num_envs."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    action_masks: torch.Tensor | None = None
    """bool [B, n], True = valid: the masks the actions were sampled under (None: unmasked)."""
    rewards: torch.Tensor | None = None
    """float [B]: the env's reward of each step, as stored (None: a batch built without it)."""
    dones: torch.Tensor | None = None
    """bool [B]: the step ended its episode (terminated or truncated): ARS scores whole
    episodes from `rewards` and these (None: a batch built without them)."""


class TransitionBatch(NamedTuple):
    """A batch of off-policy transitions sampled from replay; leading dimension B."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor  # float 0/1: 1 means no bootstrap
    next_action_masks: torch.Tensor | None = None
    """bool [B, n]: the valid actions at `next_obs` (None: unmasked env; all True where the
    episode ended, as the env's mask then belongs to the next episode's first state)."""
