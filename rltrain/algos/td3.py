"""Twin Delayed DDPG (Fujimoto et al. 2018), for Box action spaces.

`TD3.stack(members, streams)` is the same algorithm for a batch of seeds (`[S, ...]` networks,
each seed's draws from its own stream): every line below serves both forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.base import decay_lrs
from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.off_policy_steps import (
    DeterministicActorCritic,
    critic_step,
    td_target,
    update_metrics,
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
        self._actor_loss: torch.Tensor | float = 0.0  # the latest actor step's

    @classmethod
    def stack(cls, members: list[Any], streams: Any) -> Any:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed)."""
        batch = super().stack(members, streams)
        batch._actor_loss = 0.0  # until the batch's first actor step
        return batch

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """One critic step; every `policy_delay`-th call also an actor step and target updates.
        A metrics dict (a seed batch: one per seed, each on its own minibatch `[S, B, ...]`).

        `train/actor_loss` repeats the latest actor loss on steps that skip the actor.
        """
        rates = decay_lrs(self, global_step)
        losses, q = critic_step(self.critic, self.critic_optimizer, batch, self.target(batch))
        if self.n_updates % self.cfg.policy_delay == 0:
            self._actor_loss = self.actor_and_targets_step(batch.obs)
        self.n_updates += 1
        return update_metrics(losses, q, {"train/actor_loss": self._actor_loss}, rates)

    @torch.no_grad()
    def target_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """Target policy smoothing: μ'(s') + clip(N(0, σ²), −c, c), clipped to [-1, 1]."""
        action = self.actor_target(next_obs)
        return smoothed(action, self.draws.like("normal", action), self.cfg)

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) min_i Q'_i(s', ã'), shape [B]."""
        return td3_target(self.critic_target, batch, self.target_action(batch.next_obs),
                          self.cfg.gamma)


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
