"""CrossQ (Bhatt et al. 2024, "CrossQ: Batch Normalization in Deep Reinforcement Learning for
Greater Sample Efficiency and Simplicity"), for Box actions: SAC (`algos/sac.py`, whose actor,
temperature tuning, acting and state it inherits) without target networks, with batch-
renormalized critics and actor (`nets/norm.py` `BatchRenorm`).

As SBX's `CrossQ` (`sbx/crossq/crossq.py`, `sbx/crossq/policies.py`, araffin/sbx 9bdc9c1):
- networks: BatchRenorm on the input and after each hidden ReLU, in each critic (1024x1024 by
  default) and in the actor (256x256; `batch_norm_actor`);
- critic step: a' ~ π(s') with the actor in eval mode (its running statistics); ONE critic pass
  in train mode over the joint batch [s; s'], [a; a'], so the batch statistics cover both
  halves; the target r + γ (1 − terminated) (min_i Q_i(s', a') − α log π(a'|s')) takes the
  s' half of that pass, detached (no target network: the critics bootstrap from themselves);
  the loss, each critic's MSE on the s half, summed over critics (SBX halves it: Adam's step
  is the same);
- actor and temperature step (SAC's `actor_learn`) after every `policy_delay`-th critic
  step (the 3rd, 6th, ...: SBX's `(n_updates + 1) % policy_delay == 0`), the actor in train mode
  (batch statistics, running ones updated) and the critics in eval mode (running statistics);
- Adam with β1 = `adam_beta1` (0.5) for the actor and critics; the temperature's keeps 0.9.
Acting and evaluation use the actor in eval mode.

CrossQ has no stacked form: a seed batch runs each seed's own CrossQ in turn (`nets/seeded.py`
refuses the BatchRenorm layers).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.algos.base import decay_lrs
from rltrain.algos.configs.crossq import CrossQConfig
from rltrain.algos.off_policy_steps import mse_losses, update_metrics
from rltrain.algos.optim import adam
from rltrain.algos.sac import SAC, sac_target
from rltrain.nets.mode import eval_mode, train_mode
from rltrain.nets.seeded import NotStackable
from rltrain.nets.spec import ActorCriticSpecs
from rltrain.types import EnvSpec, TransitionBatch


class CrossQ(SAC):
    """SAC with batch-renormalized networks, a joint-batch critic pass and no target network."""

    cfg: CrossQConfig
    STATE = ("actor", "critic", "actor_optimizer", "critic_optimizer", "alpha_optimizer")
    learn = None  # its update is its own (train and eval modes around each pass), not SAC's
    # `learn`: it has no compiled form yet (`algos/compiled.py`)

    def __init__(self, cfg: CrossQConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        super().__init__(cfg, spec, device)
        # the resting mode: acting (and anything else) reads the running statistics; the
        # passes that take batch statistics switch to train mode for their duration
        self.actor.eval()
        self.critic.eval()
        zero = torch.zeros((), device=self.device)
        # the latest actor step's metrics (SAC's `_actor_metrics` is unused): SBX's 0s at first
        self._latest_actor = {"train/actor_loss": zero, "train/entropy": zero}

    def net_specs(self) -> ActorCriticSpecs:
        """SAC's, with BatchRenorm in the critics (and the actor, `batch_norm_actor`), and the
        critics `critic_hidden_sizes` wide unless `net.hidden` / `net.critic_hidden` says."""
        actor, critic = super().net_specs()
        cfg = self.cfg
        renorm = (cfg.batch_norm_momentum, cfg.renorm_warmup_steps)
        if cfg.net.hidden is None and cfg.net.critic_hidden is None:
            critic = dataclasses.replace(critic, hidden=tuple(cfg.critic_hidden_sizes))
        return ActorCriticSpecs(
            dataclasses.replace(actor, batch_renorm=renorm if cfg.batch_norm_actor else None),
            dataclasses.replace(critic, batch_renorm=renorm))

    def make_critic_target(self) -> nn.Module | None:
        """None: CrossQ has no target network."""
        return None

    def make_optimizer(self, net: nn.Module, lr: float) -> Any:
        """Adam with β1 = `adam_beta1` (SBX's 0.5)."""
        return adam(net.parameters(), lr, betas=(self.cfg.adam_beta1, 0.999))

    @classmethod
    def stack(cls, members: list[Any], streams: Any) -> Any:
        """Not stackable (`BatchRenorm`): a seed batch runs the members in turn."""
        raise NotStackable("CrossQ's BatchRenorm layers")

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """A critic step; after every `policy_delay`-th one an actor and α step. The metrics
        (actor values repeat their latest, 0 before the first actor step, as SBX's)."""
        rates = decay_lrs(self, global_step)
        losses, q = self.critic_update(batch)
        self.n_updates += 1
        if self.n_updates % self.cfg.policy_delay == 0:
            self._latest_actor = self._actor_alpha_step(batch.obs, batch.rewards.shape[-1])
        return update_metrics(losses, q, self._latest_actor, rates, {"train/alpha": self.alpha})

    def critic_update(self, batch: TransitionBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One critic step (`crossq_critic_pass` for Q(s, a) and the target): (each critic's
        loss `[E]`, Q(s, a) `[E, B]`), detached."""
        rows = batch.rewards.shape[-1]
        with torch.no_grad(), eval_mode(self.actor):
            next_action, next_log_prob = self.actor(batch.next_obs, noise=self._noise(rows))

        def objective(critic: Any) -> tuple[torch.Tensor, Any]:
            q, y = crossq_critic_pass(critic, batch, next_action, next_log_prob, self.alpha,
                                      self.cfg.gamma)
            losses = mse_losses(q, y)
            return losses.sum(), (losses, q)
        with train_mode(self.critic):
            return self.steps.minimize(("critic",), objective)

    def _actor_alpha_step(self, obs: Any, rows: int) -> dict[str, torch.Tensor]:
        """SAC's actor and α step (`actor_learn`), the actor in train mode and the critics in
        eval mode."""
        with train_mode(self.actor), eval_mode(self.critic):
            loss, entropy = self.actor_learn(self.steps, obs, self._noise(rows))
        return {"train/actor_loss": loss, "train/entropy": entropy}


# ---- CrossQ's math ------------------------------------------------------------------------

def crossq_critic_pass(critic: Any, batch: TransitionBatch, next_action: torch.Tensor,
                       next_log_prob: torch.Tensor, alpha: torch.Tensor,
                       gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The critics once over the joint batch ([s; s'], [a; a']: one set of batch statistics for
    both, in whatever mode `critic` is): (Q_i(s, a) `[E, B]`, with its graph; the target
    y = r + γ (1 − terminated) (min_i Q_i(s', a') − α log π(a'|s')) `[B]` from the s' half,
    detached: `sac_target` over that half)."""
    rows = batch.rewards.shape[-1]
    joint_obs = obs_ops.apply(lambda s, s_next: torch.cat([s, s_next]), batch.obs,
                              batch.next_obs)
    q_joint = critic(joint_obs, torch.cat([batch.actions, next_action]))  # [E, 2B]
    q, next_q = q_joint[..., :rows], q_joint[..., rows:].detach()
    y = sac_target(lambda obs, action: next_q, batch, next_action, next_log_prob, alpha, gamma)
    return q, y


def build(cfg: CrossQConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> CrossQ:
    """Registry builder."""
    return CrossQ(cfg, spec, device)
