"""Truncated Quantile Critics (Kuznetsov et al. 2020), for Box actions: SAC (`algos/sac.py`,
whose actor, temperature tuning, acting, state and seed-batch `stack` it inherits) with an
ensemble of N critics of M quantiles each (`nets/continuous.py` `QEnsemble(outputs=M)`).

As SB3-contrib's TQC (`sb3_contrib/tqc/tqc.py`):
- target: a' ~ π(s'); the N·M target quantiles Z'(s', a') pooled and sorted, the largest
  `top_quantiles_to_drop_per_net`·N dropped, each kept one y_k = r + γ (1 − terminated)
  (z_k − α log π(a'|s'));
- critic loss: each critic's M quantiles against the kept targets under the quantile Huber loss
  (κ = 1, τ̂_i = (2i + 1) / 2M), averaged over quantiles, targets and rows
  (`quantile_huber_loss(..., sum_over_quantiles=False)`); the logged `train/q_loss`, the mean
  over critics, is SB3-contrib's `critic_loss`. The step sums the critics' losses (as SAC's
  does) where SB3-contrib averages them: N times its gradient, which Adam's step normalizes;
- actor loss: α log π(a|s) − the mean of every critic's quantiles of Z(s, a), a ~ π(s) (SB3-
  contrib's `critic(obs, actions_pi).mean(dim=2).mean(dim=1)`), with SAC's temperature step
  (`entropy_actor_objective`).

Every line serves a single run (`[E, B, M]` critic outputs) and a seed batch (`[S, E, B, M]`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rltrain.algos.configs.tqc import TQCConfig
from rltrain.algos.off_policy_steps import critic_objective, quantile_huber_loss, td_target
from rltrain.algos.sac import SAC
from rltrain.nets.continuous import QEnsemble
from rltrain.nets.spec import NetSpec
from rltrain.types import EnvSpec, TransitionBatch


class TQC(SAC):
    """SAC with `n_critics` quantile critics and a truncated mixture of their quantiles as the
    target."""

    cfg: TQCConfig
    COMPILE_PAYS_AFTER = 10_000
    """`compile=auto` from this many planned gradient steps: its compiled update saved ~5.8 ms of
    ~12.6 at Hopper's shapes, paying a cold compile back within ~5k steps
    (benchmarks/results/compiled_update.md)."""

    def make_critic(self, spec: NetSpec) -> nn.Module:
        """`n_critics` critics of `n_quantiles` outputs each: Z(s, a) `[E, B, M]`."""
        return QEnsemble(spec, self.spec.action_dim, n=self.cfg.n_critics,
                         outputs=self.cfg.n_quantiles)

    def actor_q(self, critic: Any) -> Callable[[Any, torch.Tensor], torch.Tensor]:
        """The mean of all the critics' quantiles (`mean_quantiles`), which the actor step
        maximizes."""
        return functools.partial(mean_quantiles, critic)

    def critic_objective(self, critic: Any, batch: TransitionBatch,
                         y: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, Any]]:
        """The quantile Huber loss against the truncated target (`tqc_losses`): (its sum,
        (each critic's loss `[..., E]`, each critic's mean quantile `[..., E, B]`))."""
        total, (losses, z) = critic_objective(critic, batch, y, tqc_losses)
        return total, (losses, z.mean(-1))

    @torch.no_grad()
    def soft_target(self, critic_target: Any, batch: TransitionBatch,
                    next_action: tuple[torch.Tensor, torch.Tensor],
                    alpha: torch.Tensor) -> torch.Tensor:
        """The kept target quantiles `[B, K]` (`tqc_target`)."""
        return tqc_target(critic_target, batch, *next_action, alpha, self.cfg.gamma,
                          self.cfg.top_quantiles_to_drop_per_net * self.cfg.n_critics)


# ---- TQC's math, written once for a single run and a seed batch (`[S, ...]`, α `[S]`) --------

def mean_quantiles(critic: Callable[[Any, torch.Tensor], torch.Tensor], obs: Any,
                   action: torch.Tensor) -> torch.Tensor:
    """The mean over every critic's quantiles, Z `[..., E, B, M]` -> `[..., 1, B]` (an ensemble
    of one, whose min `entropy_actor_objective` takes)."""
    return critic(obs, action).mean(-1).mean(-2, keepdim=True)


@torch.no_grad()
def tqc_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
               batch: TransitionBatch, next_action: torch.Tensor, next_log_prob: torch.Tensor,
               alpha: torch.Tensor, gamma: float, drop: int) -> torch.Tensor:
    """y_k = r + γ (1 − terminated) (z_(k) − α log π(a'|s')) for the K = E·M − `drop` smallest
    of the target critics' pooled quantiles z_(1) <= ... <= z_(E·M) at (s', a'); `[..., B, K]`."""
    z = critic_target(batch.next_obs, next_action)  # [..., E, B, M]
    pooled = z.movedim(-3, -2).flatten(-2).sort(-1).values  # [..., B, E·M], ascending
    kept = pooled[..., :pooled.shape[-1] - drop]
    soft = kept - alpha[..., None, None] * next_log_prob.unsqueeze(-1)
    return td_target(batch.rewards.unsqueeze(-1), soft, batch.terminated.unsqueeze(-1), gamma)


def tqc_losses(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each critic's quantile Huber loss: Z `[..., E, B, M]` against the targets `y`
    `[..., B, K]`, averaged over quantiles, targets and rows -> `[..., E]`."""
    return quantile_huber_loss(z, y.unsqueeze(-3), sum_over_quantiles=False).mean(-1)


def build(cfg: TQCConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> TQC:
    """Registry builder."""
    return TQC(cfg, spec, device)


def stack(members: list[TQC], streams: Any) -> TQC:
    """A seed batch's TQC (`SAC.stack`: the members' networks stacked `[S, ...]`)."""
    return TQC.stack(members, streams)
