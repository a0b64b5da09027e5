"""Deep Q-Network (Mnih et al. 2015) with optional double-Q (van Hasselt et al. 2016) and dueling
heads (Wang et al. 2016), for Discrete actions."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rltrain.algos.base import metric_rows, off_policy_lr, set_lr
from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.draws import Draws
from rltrain.algos.off_policy_steps import linear_schedule, td_target, update_target_
from rltrain.algos.optim import adam
from rltrain.algos.seed_optim import stacked_optimizer
from rltrain.algos.steps import EagerSteps, Trained
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.q import QNetwork, masked_argmax
from rltrain.nets.spec import NetSpec, resolve_nets
from rltrain.types import EnvSpec, TransitionBatch


def greedy_next_value(q_next_online: torch.Tensor, q_next_target: torch.Tensor,
                      double_q: bool, mask: torch.Tensor | None = None) -> torch.Tensor:
    """max_a' Q_target(s', a') or, with double-Q, Q_target(s', argmax_a' Q_online(s', a')); [B].
    `mask` [B, n]: a' ranges over the valid actions at s' only."""
    best = masked_argmax(q_next_online if double_q else q_next_target, mask)
    return q_next_target.gather(-1, best.unsqueeze(-1)).squeeze(-1)


# ---- DQN's math, written once: over the last dimension, so a seed batch's stacked networks
# (`DQN.stack`, inputs `[S, B, ...]`) run the same lines ---------------------------------------

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


METRICS = ("train/q_loss", "train/mean_q", "train/td_target_mean", "train/grad_norm")
"""What `DQN.update` measures on the device, in this order (a seed batch: per seed)."""


def per_run_mean(x: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
    """The mean of `x` `[..., B, ...]` over all but the leading dimensions `loss` has (none for
    a single run, the seeds for a batch); DQN's `[..., B]` is averaged as it is."""
    if x.dim() > loss.dim() + 1:  # QR-DQN's quantiles `[..., B, M]`
        x = x.flatten(loss.dim())
    return x.mean(-1)


class DQN:
    """Owns the online and target Q-networks and the optimizer; ε-greedy `act`.

    `DQN.stack(members, streams)` is the same algorithm for a batch of seeds: its networks and
    optimizer are the members' stacked `[S, ...]` (`nets/seeded.py`), its draws each seed's own
    stream, and every method below takes and returns a leading seed dimension; each seed's
    Runner then reads its seed through `seed_batch/view.py` (no copies to keep in step)."""

    COMPILE_PAYS_AFTER: int | None = 100_000
    """`compile=auto` from this many planned gradient steps: at RL-Zoo's CartPole shapes ([256,
    256], batch 64) the compiled step took 0.80 ms against 1.16 eager, the matrix products
    being most of both, paying a cold compile back within ~46k steps
    (benchmarks/results/compiled_update.md)."""

    def __init__(self, cfg: DQNConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        if spec.action_kind != "discrete":
            raise UserError("dqn needs a Discrete action space")
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        q_spec = resolve_nets(cfg, spec).critic  # a Q-network: net.critic_hidden applies
        self.q_net = self.make_q_net(q_spec).to(self.device)
        self.q_target = copy.deepcopy(self.q_net).requires_grad_(False)
        self.optimizer: Any = self.make_optimizer()
        self.draws: Any = Draws(self.device)
        self.link_networks()
        self.next_target_update = cfg.target_update_interval

    def make_q_net(self, spec: NetSpec) -> nn.Module:
        """The Q-network (`spec`: its network settings): one value per action (a subclass's
        own, such as QR-DQN's quantiles)."""
        return QNetwork(spec, self.spec.action_dim, self.cfg.dueling)

    def make_optimizer(self) -> Any:
        """The Q-network's Adam."""
        return adam(self.q_net.parameters(), self.cfg.lr)

    def link_networks(self) -> None:
        """What follows from the networks (the evaluated policy, what the update trains with
        which optimizer, `algos/steps.py`): set again when `stack` replaces them with the
        seeds' stacked ones and optimizer."""
        self.policy = self.q_net
        self.params = list(self.q_net.parameters())
        self.steps = EagerSteps({"q_net": Trained(self.q_net, self.optimizer)},
                                {"q_target": self.q_target})
        self.graph: Any = None  # the compiled `learn` (`algos/compiled.py`), when one is used

    @classmethod
    def stack(cls, members: list[DQN], streams: Any) -> DQN:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed)."""
        batch = copy.copy(members[0])
        batch.draws = streams
        batch.q_net = seeded.stack_modules([m.q_net for m in members])
        batch.q_target = seeded.stack_modules([m.q_target for m in members], requires_grad=False)
        batch.optimizer = stacked_optimizer(list(batch.q_net.parameters()),
                                            [m.optimizer for m in members])
        batch.link_networks()
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
        """ε-greedy actions `[N]`, drawn independently for every env row; with `action_mask`
        [N, n] both the greedy and the random action are valid ones."""
        greedy = masked_argmax(self.q_values(obs), action_mask)
        random = self.random_actions(greedy.shape[-1], action_mask)
        explore = self.draws.uniform(greedy.shape[-1:]) < self.epsilon(global_step)
        return torch.where(explore, random, greedy)

    def q_values(self, obs: Any) -> torch.Tensor:
        """The values the greedy action maximizes, `[..., N, n]`: Q(s, ·)."""
        return self.q_net(obs)

    def target_of(self, q_net: Any, q_target: Any, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) Q̂(s', a*), detached; [B] (a subclass's own)."""
        return dqn_target(q_net, q_target, batch, self.cfg)

    def loss_of(self, q_net: Any, batch: TransitionBatch, target: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss `[...]`, what the network predicts for the taken actions `[..., B, ...]`):
        DQN's Huber loss of Q(s, a) to `target` (a subclass's own)."""
        return dqn_loss(q_net, batch, target)

    def td_targets(self, batch: TransitionBatch) -> torch.Tensor:
        """The targets of `batch` under the networks as they are (`target_of`)."""
        return self.target_of(self.q_net, self.q_target, batch)

    def learning_rate(self, global_step: int) -> float:
        """Learning rate at `global_step` env steps (constant unless `lr_decay_steps` > 0)."""
        return off_policy_lr(self.cfg, self.cfg.lr, global_step)

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """The target update when due, then one Huber-loss gradient step on `batch`; a metrics
        dict (a seed batch: one per seed, each seed on its own minibatch `[S, B, ...]`).

        The copy comes first, as SB3's (which copies while collecting): every gradient step of a
        burst (`gradient_steps` per `train_freq`) regresses toward the online network as of the
        last copy that fell due, none toward one a burst older. Copying after a burst's first
        step instead left CartPole at RL-Zoo's values (50k, seeds 0-2) at 24.6, 111.4, 16.5;
        copying first: 500 on all three."""
        lr = self.learning_rate(global_step)
        set_lr(self.optimizer, lr)
        self.next_target_update = update_target_(self.q_target, self.q_net, self.cfg,
                                                 global_step, self.next_target_update)
        learn = self.graph or functools.partial(self.learn, self.steps)
        values = learn(batch)
        return metric_rows(METRICS, values, {"train/learning_rate": lr,
                                             "exploration/epsilon": self.epsilon(global_step)})

    def learn(self, steps: Any, batch: TransitionBatch) -> torch.Tensor:
        """The gradient step's math, once for both forms of `steps` (`algos/steps.py`): the
        targets (`target_of`), one clipped step on `loss_of`; `METRICS`' values `[..., 4]`."""
        target = self.target_of(steps.net("q_net"), steps.net("q_target"), batch)

        def objective(q_net: Any) -> tuple[torch.Tensor, Any]:
            loss, q = self.loss_of(q_net, batch, target)
            return loss.sum(), (loss, q)  # seeds share no parameter: each its own gradient
        (loss, q), norm = steps.minimize(("q_net",), objective, self.cfg.max_grad_norm,
                                         norm=True)
        return torch.stack([loss, per_run_mean(q, loss), per_run_mean(target, loss), norm], -1)

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


def stack(members: list[DQN], streams: Any) -> DQN:
    """A seed batch's DQN (`seed_batch/batch.py` looks for this beside `build`)."""
    return DQN.stack(members, streams)
