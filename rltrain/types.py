"""Typed values that flow between the env, the buffers, the algorithms and the loggers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

Metrics = dict[str, float]


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about an environment to build its networks."""

    obs_shape: tuple[int, ...]
    action_kind: str  # "discrete" or "box"
    action_dim: int  # number of discrete actions, or size of the Box action vector
    num_envs: int
    pixels: bool = False  # uint8 pixel observations (0..255, delivered as uint8): scaled by 1/255
    frame_stack: int = 0  # > 0: obs are [k, H, W] stacks of the last k frames, newest last

    @property
    def obs_dim(self) -> int:
        """Flattened observation size."""
        n = 1
        for d in self.obs_shape:
            n *= d
        return n


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
