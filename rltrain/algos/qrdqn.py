"""Quantile-regression DQN (Dabney et al. 2017), as SB3-contrib's `QRDQN`, with DQN's options:
double-Q, invalid-action masks, image and frame-stacked (Atari) observations; Discrete actions.

The Q-network gives N quantiles of the return per action (`nets/q.py` `QuantileQNetwork`); the
greedy action maximises their mean. The target of the taken action's quantiles is
r + γ (1 − terminated) θ̂(s', a*), all N quantiles of the target network at the greedy a* (picked
by the target network's means, or by the online network's with double-Q); the loss is the
quantile Huber loss (`off_policy_steps.quantile_huber_loss`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rltrain.algos.configs.qrdqn import QRDQNConfig
from rltrain.algos.dqn import DQN
from rltrain.algos.off_policy_steps import quantile_huber_loss, td_target
from rltrain.algos.optim import adam
from rltrain.errors import UserError
from rltrain.nets.q import QuantileQNetwork, masked_argmax
from rltrain.nets.spec import NetSpec
from rltrain.types import EnvSpec, TransitionBatch


def pick_quantiles(quantiles: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The quantiles `[..., B, N]` of `actions` `[..., B]` out of `quantiles` `[..., B, n, N]`."""
    index = actions.long()[..., None, None].expand(*actions.shape, 1, quantiles.shape[-1])
    return quantiles.gather(-2, index).squeeze(-2)


# ---- QR-DQN's math, written once: over the last dimensions, so a seed batch's stacked networks
# (`QRDQN.stack`, inputs `[S, B, ...]`) run the same lines -------------------------------------

@torch.no_grad()
def qrdqn_target(q_net: Callable[[Any], torch.Tensor], q_target: Callable[[Any], torch.Tensor],
                 batch: TransitionBatch, cfg: QRDQNConfig) -> torch.Tensor:
    """The target quantiles r + γ (1 − terminated) θ̂(s', a*), `[..., B, N]`: a* greedy by the
    target network's quantile means, or by the online network's with double-Q (among the valid
    actions at s' when the batch has masks); detached."""
    next_target = q_target(batch.next_obs)  # [..., B, n, N]
    chooser = q_net(batch.next_obs) if cfg.double_q else next_target
    best = masked_argmax(chooser.mean(-1), batch.next_action_masks)
    next_quantiles = pick_quantiles(next_target, best)
    return td_target(batch.rewards.unsqueeze(-1), next_quantiles,
                     batch.terminated.unsqueeze(-1), cfg.gamma)


def qrdqn_loss(q_net: Callable[[Any], torch.Tensor], batch: TransitionBatch,
               target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the quantile Huber loss of θ(s, a) to the `target` quantiles, `[...]`; θ(s, a),
    `[..., B, N]`)."""
    current = pick_quantiles(q_net(batch.obs), batch.actions)
    return quantile_huber_loss(current, target, sum_over_quantiles=True).mean(-1), current



class QRDQN(DQN):
    """DQN with N quantiles of the return per action: DQN's acting (ε-greedy on the quantiles'
    means), update, target updates, state and `stack` (a seed batch), called, not copied; its
    own network, optimizer ε, target and loss."""

    cfg: QRDQNConfig
    COMPILE_PAYS_AFTER = 25_000
    """`compile=auto` from this many planned gradient steps: the quantile loss's pairs fuse into
    one kernel, 1.4 ms a step against 2.9 eager at CartPole's shapes, paying a cold compile back
    within ~12k steps (benchmarks/results/compiled_update.md)."""

    def __init__(self, cfg: QRDQNConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        if spec.action_kind != "discrete":
            raise UserError("qrdqn needs a Discrete action space")
        super().__init__(cfg, spec, device)

    def make_q_net(self, spec: NetSpec) -> nn.Module:
        """The quantile network: N quantiles per action, `[..., n, N]`."""
        return QuantileQNetwork(spec, self.spec.action_dim, self.cfg.n_quantiles)

    def make_optimizer(self) -> Any:
        """Adam with SB3-contrib's ε for QR-DQN (the paper's 0.01 / 32 at batch 32)."""
        return adam(self.q_net.parameters(), self.cfg.lr, eps=0.01 / self.cfg.batch_size)

    def q_values(self, obs: Any) -> torch.Tensor:
        """The quantiles' means, which the greedy action maximizes; `[..., N, n]`."""
        return self.q_net(obs).mean(-1)

    def target_of(self, q_net: Any, q_target: Any, batch: TransitionBatch) -> torch.Tensor:
        """The target quantiles, detached; `[B, N]`."""
        return qrdqn_target(q_net, q_target, batch, self.cfg)

    def loss_of(self, q_net: Any, batch: TransitionBatch, target: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the quantile Huber loss `[...]`, the taken actions' quantiles `[..., B, N]`)."""
        return qrdqn_loss(q_net, batch, target)


def build(cfg: QRDQNConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> QRDQN:
    """Registry builder."""
    return QRDQN(cfg, spec, device)


def stack(members: list[QRDQN], streams: Any) -> QRDQN:
    """A seed batch's QRDQN (DQN's `stack`, over the quantile networks)."""
    return QRDQN.stack(members, streams)
