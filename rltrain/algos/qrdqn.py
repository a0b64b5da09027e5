"""Quantile-regression DQN (Dabney et al. 2017), as SB3-contrib's `QRDQN`, with DQN's options:
double-Q, invalid-action masks, image and frame-stacked (Atari) observations; Discrete actions.

The Q-network gives N quantiles of the return per action (`nets/q.py` `QuantileQNetwork`); the
greedy action maximises their mean. The target of the taken action's quantiles is
r + γ (1 − terminated) θ̂(s', a*), all N quantiles of the target network at the greedy a* (picked
by the target network's means, or by the online network's with double-Q); the loss is the
quantile Huber loss (`off_policy_steps.quantile_huber_loss`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from rltrain.algos.base import grad_norm_step, metric_rows, off_policy_lr, set_lr
from rltrain.algos.configs.qrdqn import QRDQNConfig
from rltrain.algos.draws import Draws
from rltrain.algos.off_policy_steps import (
    linear_schedule,
    quantile_huber_loss,
    td_target,
    update_target_,
)
from rltrain.algos.optim import adam, stacked_optimizer
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.q import QuantileQNetwork, masked_argmax
from rltrain.nets.spec import resolve_nets
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


METRICS = ("train/q_loss", "train/mean_q", "train/td_target_mean", "train/grad_norm")
"""What `QRDQN.update` measures on the device, in this order (a seed batch: per seed); the Q
values are the quantiles' means."""


class QRDQN:
    """Owns the online and target quantile networks and the optimizer; ε-greedy `act`.

    `QRDQN.stack(members, streams)` is the same algorithm for a batch of seeds, as `DQN.stack`:
    networks and optimizer stacked `[S, ...]` (`nets/seeded.py`), each seed drawing from its own
    stream, every method taking and returning a leading seed dimension."""

    def __init__(self, cfg: QRDQNConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        if spec.action_kind != "discrete":
            raise UserError("qrdqn needs a Discrete action space")
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        q_spec = resolve_nets(cfg, spec).critic  # a Q-network: net.critic_hidden applies
        self.q_net = QuantileQNetwork(q_spec, spec.action_dim, cfg.n_quantiles).to(self.device)
        self.q_target = copy.deepcopy(self.q_net).requires_grad_(False)
        # SB3-contrib's Adam ε for QR-DQN (the paper's 0.01 / 32 at batch 32)
        self.optimizer: Any = adam(self.q_net.parameters(), cfg.lr, eps=0.01 / cfg.batch_size)
        self.draws: Any = Draws(self.device)
        self.link_networks()
        self.next_target_update = cfg.target_update_interval

    def link_networks(self) -> None:
        """The evaluated policy and the trained parameters: set again by `stack`."""
        self.policy = self.q_net
        self.params = list(self.q_net.parameters())

    @classmethod
    def stack(cls, members: list[QRDQN], streams: Any) -> QRDQN:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed)."""
        batch = copy.copy(members[0])
        batch.draws = streams
        batch.q_net = seeded.stack_modules([m.q_net for m in members])
        batch.q_target = seeded.stack_modules([m.q_target for m in members], requires_grad=False)
        batch.link_networks()
        batch.optimizer = stacked_optimizer(batch.params, [m.optimizer for m in members])
        return batch

    def epsilon(self, global_step: int) -> float:
        """ε of the exploration schedule at `global_step` env steps."""
        c = self.cfg
        return linear_schedule(global_step, c.exploration_initial_eps, c.exploration_final_eps,
                               c.exploration_steps)

    def random_actions(self, num_envs: int, masks: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform actions `[N]`, among each row's valid ones when `masks` `[N, n]` is given."""
        if masks is None:
            return self.draws.randint(self.spec.action_dim, (num_envs,))
        return self.draws.choice(masks)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """ε-greedy actions `[N]` (greedy: the largest quantile mean), drawn independently for
        every env row, among the valid actions when `action_mask` [N, n] is given."""
        greedy = masked_argmax(self.q_net(obs).mean(-1), action_mask)
        random = self.random_actions(greedy.shape[-1], action_mask)
        explore = self.draws.uniform(greedy.shape[-1:]) < self.epsilon(global_step)
        return torch.where(explore, random, greedy)

    def td_targets(self, batch: TransitionBatch) -> torch.Tensor:
        """The target quantiles, detached; `[B, N]`."""
        return qrdqn_target(self.q_net, self.q_target, batch, self.cfg)

    def learning_rate(self, global_step: int) -> float:
        """Learning rate at `global_step` env steps (constant unless `lr_decay_steps` > 0)."""
        return off_policy_lr(self.cfg, self.cfg.lr, global_step)

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """One quantile-Huber gradient step on `batch`, then the target update when due; a
        metrics dict (a seed batch: one per seed, each on its own minibatch `[S, B, ...]`)."""
        lr = self.learning_rate(global_step)
        set_lr(self.optimizer, lr)
        target = self.td_targets(batch)
        loss, current = qrdqn_loss(self.q_net, batch, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norm = grad_norm_step(self.optimizer, self.params, self.cfg.max_grad_norm)
        self.next_target_update = update_target_(self.q_target, self.q_net, self.cfg,
                                                 global_step, self.next_target_update)
        values = torch.stack([loss.detach(), current.detach().mean((-2, -1)),
                              target.mean((-2, -1)), norm], -1)
        return metric_rows(METRICS, values, {"train/learning_rate": lr,
                                             "exploration/epsilon": self.epsilon(global_step)})

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


def build(cfg: QRDQNConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> QRDQN:
    """Registry builder."""
    return QRDQN(cfg, spec, device)


def stack(members: list[QRDQN], streams: Any) -> QRDQN:
    """A seed batch's QRDQN (the runner looks for this beside `build`)."""
    return QRDQN.stack(members, streams)
