"""Deep Q-Network (Mnih et al. 2015) with optional double-Q (van Hasselt et al. 2016) and dueling
heads (Wang et al. 2016), for Discrete actions."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from rltrain.algos.base import grad_norm_step, off_policy_lr, set_lr
from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.off_policy_steps import soft_update_, td_target
from rltrain.algos.optim import adam
from rltrain.errors import UserError
from rltrain.nets.q import QNetwork, masked_argmax
from rltrain.nets.spec import resolve_nets
from rltrain.types import EnvSpec, Metrics, TransitionBatch


def linear_schedule(step: int, initial: float, final: float, decay_steps: int) -> float:
    """Linear from `initial` at step 0 to `final` at `decay_steps`, then constant."""
    if decay_steps <= 0:
        return final
    frac = min(1.0, max(0.0, step / decay_steps))
    return initial + frac * (final - initial)


def greedy_next_value(q_next_online: torch.Tensor, q_next_target: torch.Tensor,
                      double_q: bool, mask: torch.Tensor | None = None) -> torch.Tensor:
    """max_a' Q_target(s', a') or, with double-Q, Q_target(s', argmax_a' Q_online(s', a')); [B].
    `mask` [B, n]: a' ranges over the valid actions at s' only."""
    best = masked_argmax(q_next_online if double_q else q_next_target, mask)
    return q_next_target.gather(-1, best.unsqueeze(-1)).squeeze(-1)


# ---- DQN's math, written once: the networks are callables, so a seed batch's stacked ones
# (`seeds/dqn.py`, inputs `[S, B, ...]`) run the same lines; losses reduce the last dimension ----

@torch.no_grad()
def dqn_target(q_net: Callable[[Any], torch.Tensor], q_target: Callable[[Any], torch.Tensor],
               batch: TransitionBatch, cfg: DQNConfig) -> torch.Tensor:
    """y = r + γ (1 − terminated) Q̂(s', a*): a* greedy under the target network, or under the
    online one with double-Q; detached."""
    q_next_target = q_target(batch.next_obs)
    q_next_online = q_net(batch.next_obs) if cfg.double_q else q_next_target
    next_value = greedy_next_value(q_next_online, q_next_target, cfg.double_q,
                                   batch.next_action_masks)
    return td_target(batch.rewards, next_value, batch.terminated, cfg.gamma)


def dqn_loss(q_net: Callable[[Any], torch.Tensor], batch: TransitionBatch,
             target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the Huber loss of Q(s, a) to `target`, Q(s, a))."""
    q = q_net(batch.obs).gather(-1, batch.actions.long().unsqueeze(-1)).squeeze(-1)
    return F.smooth_l1_loss(q, target, reduction="none").mean(-1), q


def update_target_(target: list[torch.Tensor], online: list[torch.Tensor], cfg: DQNConfig,
                   global_step: int, next_update: int) -> int:
    """The target network's update: a Polyak blend every step when tau < 1, else a copy once
    `global_step` reaches `next_update`; returns the step of the next copy."""
    if cfg.tau < 1.0:
        soft_update_(target, online, cfg.tau)
    elif global_step >= next_update:
        soft_update_(target, online, 1.0)
        interval = cfg.target_update_interval
        return (global_step // interval + 1) * interval
    return next_update


class DQN:
    """Owns the online and target Q-networks and the optimizer; ε-greedy `act`."""

    def __init__(self, cfg: DQNConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        if spec.action_kind != "discrete":
            raise UserError("dqn needs a Discrete action space")
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        q_spec = resolve_nets(cfg, spec).critic  # a Q-network: net.critic_hidden applies
        self.q_net = QNetwork(q_spec, spec.action_dim, cfg.dueling).to(self.device)
        self.q_target = copy.deepcopy(self.q_net).requires_grad_(False)
        self.policy = self.q_net
        self.optimizer = adam(self.q_net.parameters(), cfg.lr)
        self._params = list(self.q_net.parameters())
        self._target_params = list(self.q_target.parameters())
        self.next_target_update = cfg.target_update_interval

    def epsilon(self, global_step: int) -> float:
        """ε of the exploration schedule at `global_step` env steps."""
        c = self.cfg
        return linear_schedule(global_step, c.exploration_initial_eps, c.exploration_final_eps,
                              c.exploration_steps)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ε-greedy actions `[N]`, drawn independently for every env row; with `action_mask`
        [N, n] both the greedy and the random action are valid ones."""
        greedy = masked_argmax(self.q_net(obs), action_mask)
        random = (torch.randint_like(greedy, self.spec.action_dim) if action_mask is None
                  else torch.multinomial(action_mask.float(), 1).squeeze(-1))
        explore = torch.rand(greedy.shape, device=greedy.device) < self.epsilon(global_step)
        return torch.where(explore, random, greedy)

    def td_targets(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) Q̂(s', a*), detached; [B]."""
        return dqn_target(self.q_net, self.q_target, batch, self.cfg)

    def learning_rate(self, global_step: int) -> float:
        """Learning rate at `global_step` env steps (constant unless `lr_decay_steps` > 0)."""
        return off_policy_lr(self.cfg, self.cfg.lr, global_step)

    def update(self, batch: TransitionBatch, global_step: int) -> Metrics:
        """One Huber-loss gradient step on `batch`, then the target update when due."""
        lr = self.learning_rate(global_step)
        set_lr(self.optimizer, lr)
        target = self.td_targets(batch)
        loss, q = dqn_loss(self.q_net, batch, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = grad_norm_step(self.optimizer, self._params, self.cfg.max_grad_norm)
        self.next_target_update = update_target_(self._target_params, self._params, self.cfg,
                                                 global_step, self.next_target_update)
        return {
            "train/q_loss": loss.item(),
            "train/mean_q": q.detach().mean().item(),
            "train/td_target_mean": target.mean().item(),
            "train/grad_norm": norm.item(),
            "train/learning_rate": lr,
            "exploration/epsilon": self.epsilon(global_step),
        }

    def state_dict(self) -> dict[str, Any]:
        """Online and target networks, optimizer and the target-update counter, as plain data."""
        return {"q_net": self.q_net.state_dict(), "q_target": self.q_target.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "next_target_update": int(self.next_target_update)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        self.q_net.load_state_dict(state["q_net"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.next_target_update = int(state["next_target_update"])


def build(cfg: DQNConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> DQN:
    """Registry builder."""
    return DQN(cfg, spec, device)
