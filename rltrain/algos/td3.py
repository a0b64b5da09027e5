"""Twin Delayed DDPG (Fujimoto et al. 2018), for Box action spaces.

`TD3.stack(members, streams)` is the same algorithm for a batch of seeds (`[S, ...]` networks,
each seed's draws from its own stream): every line below serves both forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.off_policy_steps import (
    DeterministicActorCritic,
    td_target,
)
from rltrain.nets.continuous import TwinQ
from rltrain.types import EnvSpec, TransitionBatch


class TD3(DeterministicActorCritic):
    """Deterministic actor, twin critics (clipped double-Q), delayed actor and target updates
    (what it shares with DDPG: `off_policy_steps.DeterministicActorCritic`)."""

    COUNTERS = ("n_updates",)

    def __init__(self, cfg: TD3Config, spec: EnvSpec, device: torch.device | str = "cpu"):
        super().__init__(cfg, spec, device, lambda net: TwinQ(net, spec.action_dim))
        self.n_updates = 0  # critic updates so far; the actor updates when it is 0 mod policy_delay

    def with_actor(self) -> bool:
        """Counts this update; True on every `policy_delay`-th (the first included)."""
        due = self.n_updates % self.cfg.policy_delay == 0
        self.n_updates += 1
        return due

    def target_noise(self, batch: TransitionBatch) -> torch.Tensor:
        """Target policy smoothing's standard normal draws `[..., B, A]`."""
        return self.draws.normal((batch.rewards.shape[-1], self.spec.action_dim))

    @torch.no_grad()
    def target_of(self, steps: Any, batch: TransitionBatch, noise: torch.Tensor) -> torch.Tensor:
        """y = r + γ (1 − terminated) min_i Q'_i(s', ã'), ã' = `smoothed` μ'(s'); `[..., B]`."""
        action = smoothed(steps.net("actor_target")(batch.next_obs), noise, self.cfg)
        return td3_target(steps.net("critic_target"), batch, action, self.cfg.gamma)

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) min_i Q'_i(s', ã'), shape [B]."""
        return self.target_of(self.steps, batch, self.target_noise(batch))


# ---- TD3's math, written once over the last dimension (the critics' ensemble is the dimension
# before the rows), so a seed batch's stacked networks run it too -----------------------------

def smoothed(action: torch.Tensor, normal: torch.Tensor, cfg: TD3Config) -> torch.Tensor:
    """Target policy smoothing of `action` with the standard normal draw `normal`:
    action + clip(σ normal, −c, c), clipped to [-1, 1]."""
    noise = (normal * cfg.target_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
    return (action + noise).clamp(-1.0, 1.0)


@torch.no_grad()
def td3_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
               batch: TransitionBatch, next_action: torch.Tensor, gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) min_i Q'_i(s', ã') (clipped double-Q)."""
    next_q = critic_target(batch.next_obs, next_action).min(-2).values
    return td_target(batch.rewards, next_q, batch.terminated, gamma)


def build(cfg: TD3Config, spec: EnvSpec, device: torch.device | str = "cpu") -> TD3:
    """Registry builder."""
    return TD3(cfg, spec, device)


def stack(members: list[TD3], streams: Any) -> TD3:
    """A seed batch's TD3 (`seed_batch/batch.py` looks for this beside `build`)."""
    return TD3.stack(members, streams)
