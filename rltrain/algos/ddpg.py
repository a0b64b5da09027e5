"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016), for Box action spaces.

`DDPG.stack(members, streams)` is the same algorithm for a batch of seeds (`[S, ...]` networks,
each seed's draws from its own stream): every line below serves both forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.off_policy_steps import (
    DeterministicActorCritic,
    td_target,
)
from rltrain.nets.continuous import QEnsemble
from rltrain.types import EnvSpec, TransitionBatch


class DDPG(DeterministicActorCritic):
    """Deterministic actor, one critic, and their Polyak-averaged targets (what it shares with
    TD3: `off_policy_steps.DeterministicActorCritic`)."""

    COMPILE_PAYS_AFTER = 50_000
    """`compile=auto` from this many planned gradient steps: its compiled update took 0.38 of the
    eager one's time at Pendulum's shapes, paying a cold compile back within ~21k steps
    (benchmarks/results/compiled_update.md)."""

    def __init__(self, cfg: DDPGConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        super().__init__(cfg, spec, device, lambda net: QEnsemble(net, spec.action_dim, n=1))

    def with_actor(self) -> bool:
        """True: DDPG steps its actor on every update."""
        return True

    def target_noise(self, batch: TransitionBatch) -> None:
        """None: DDPG's target draws nothing."""
        return None

    @torch.no_grad()
    def target_of(self, steps: Any, batch: TransitionBatch, noise: None) -> torch.Tensor:
        """y = r + γ (1 − terminated) Q'(s', μ'(s')) (`ddpg_target`), shape [B]."""
        return ddpg_target(steps.net("critic_target"), steps.net("actor_target"), batch,
                           self.cfg.gamma)

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) Q'(s', μ'(s')), shape [B]."""
        return self.target_of(self.steps, batch, None)


@torch.no_grad()
def ddpg_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
                actor_target: Callable[[Any], torch.Tensor], batch: TransitionBatch,
                gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) Q'(s', μ'(s')) (the one critic of the ensemble; over the last
    dimension, so a seed batch's stacked networks run it too)."""
    next_q = critic_target(batch.next_obs, actor_target(batch.next_obs)).select(-2, 0)
    return td_target(batch.rewards, next_q, batch.terminated, gamma)


def build(cfg: DDPGConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> DDPG:
    """Registry builder."""
    return DDPG(cfg, spec, device)


def stack(members: list[DDPG], streams: Any) -> DDPG:
    """A seed batch's DDPG (`seed_batch/batch.py` looks for this beside `build`)."""
    return DDPG.stack(members, streams)
