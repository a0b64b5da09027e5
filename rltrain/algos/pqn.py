"""Parallel Q-learning, PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference
Learning"), as CleanRL's `cleanrl/pqn.py`: DQN without a replay buffer or a target network, its
Q-network normalized by a LayerNorm after each hidden layer, trained on-policy from rollouts of
many envs with Q(λ) returns, for Discrete actions.

It runs in the on-policy loop (`runner/on_policy.py`) as it is. The loop's GAE
(`rltrain.buffers.rollout.compute_gae`) with V(s) := max_a Q(s, a) gives
    returns_t = A_t + V(s_t) = r_t + γ [(1 − λ) max_a Q(s_{t+1}, a) + λ returns_{t+1}],
the Q(λ) return: a terminated step keeps r_t alone, the rollout's last step bootstraps from
max_a Q(s_T, a), and (unlike CleanRL, which treats a time limit as a termination) a truncated
step bootstraps from max_a Q of its true final observation, as every on-policy algorithm here
does. So `act` returns (the ε-greedy action, a zero log-prob, max_a Q(s, a)), `value` max_a Q,
and `update` regresses Q(s_t, a_t) on `batch.returns`. The maxima are taken while acting, by the
network of the rollout, as CleanRL's (`values[step]` and its last `next_value`: no update
happens inside a rollout, so it is the same network CleanRL uses). With an action mask, acting
and its stored max range over the valid actions; the two the loop asks `value` for (the last
observation, a truncated step's final one) over all actions, as the loop passes no mask there.

Differences from CleanRL, all deliberate: Adam, not RAdam (rltrain's own `algos/optim.py`,
which a seed batch stacks); the learning rate anneals by the shared on-policy schedule (before
update i of I it is lr·(1 − i/I), CleanRL's lr·(1 − (i − 1)/I)); the metrics average every
minibatch of the update (CleanRL logs the last one's).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.algos.base import (
    PER_SEED,
    by_seed,
    grad_norm_step,
    metric_rows,
    on_policy_lr,
    row_index,
    set_lr,
)
from rltrain.algos.configs.pqn import PQNConfig
from rltrain.algos.draws import Draws
from rltrain.algos.off_policy_steps import linear_schedule
from rltrain.algos.optim import adam
from rltrain.algos.seed_optim import stacked_optimizer
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.q import QNetwork
from rltrain.nets.spec import resolve_nets
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, RolloutBatch

OUTPUT_GAIN = math.sqrt(2)
"""Orthogonal-init gain of the Q-network's output layer: CleanRL's `layer_init` default, which
`cleanrl/pqn.py` gives every layer, the output too."""


# ---- PQN's math, written once: over the last dimension, so a minibatch `[B]` gives scalars and
# a seed batch's `[S, B]` (`PQN.stack`) one value per seed --------------------------------------

def greedy_q(q: torch.Tensor, mask: torch.Tensor | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(max_a Q(s, a), argmax_a Q(s, a)) over the last dim, over the actions `mask` allows."""
    if mask is not None:
        q = q.masked_fill(~mask, torch.finfo(q.dtype).min)
    value, best = q.max(-1)
    return value, best


def q_lambda_loss(q_net: Any, obs: Any, actions: torch.Tensor,
                  returns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the mean squared error of Q(s, a) to the Q(λ) `returns`, Q(s, a))."""
    q = q_net(obs).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    return (q - returns).pow(2).mean(-1), q


METRICS = ("train/q_loss", "train/mean_q", "train/grad_norm")
"""What each minibatch step measures on the device, in this order (a seed batch: per seed);
`update` averages them over its steps."""


class PQN:
    """Owns the Q-network and its optimizer; ε-greedy `act` with the ε of the env steps it has
    acted for; `update` takes a `RolloutBatch` whose returns are the Q(λ) returns.

    `PQN.stack(members, streams)` is the same algorithm for a batch of seeds: its network and
    optimizer are the members' stacked `[S, ...]` (`nets/seeded.py`), its draws each seed's own
    stream, and `act`, `value` and `update` take inputs with a leading seed dimension; each
    seed's Runner reads its seed through `seed_batch/view.py`."""

    def __init__(self, cfg: PQNConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        if spec.action_kind != "discrete":
            raise UserError("pqn needs a Discrete action space")
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        q_spec = resolve_nets(cfg, spec, ortho=cfg.ortho_init).critic  # net.critic_hidden applies
        self.q_net = QNetwork(q_spec, spec.action_dim).to(self.device)
        if q_spec.ortho:
            nn.init.orthogonal_(self.q_net.head.weight, OUTPUT_GAIN)
        self.optimizer: Any = adam(self.q_net.parameters(), cfg.lr)
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)
        self.draws: Any = Draws(self.device)  # a seed batch's: each seed's stream
        self.env_steps = 0  # env steps acted for (every rank's): ε's clock
        self.link_networks()

    def link_networks(self) -> None:
        """What follows from the network (the evaluated policy, the trained parameters): set
        again when `stack` replaces it with the seeds' stacked one."""
        self.policy = self.q_net  # QNetwork.act: greedy, for eval and export
        self.params = list(self.q_net.parameters())

    @classmethod
    def stack(cls, members: list[PQN], streams: Any) -> PQN:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed)."""
        batch = copy.copy(members[0])
        batch.draws, batch.collective = streams, PER_SEED
        batch.q_net = seeded.stack_modules([m.q_net for m in members])
        batch.link_networks()
        batch.optimizer = stacked_optimizer(batch.params, [m.optimizer for m in members])
        return batch

    def epsilon(self, env_steps: int) -> float:
        """ε of the exploration schedule after `env_steps` env steps."""
        c = self.cfg
        return linear_schedule(env_steps, c.exploration_initial_eps, c.exploration_final_eps,
                               c.exploration_steps)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ε-greedy action, 0, max_a Q(obs, a)) `[N]` each, ε drawn independently per env row
        at the env steps counted so far, this step's included (CleanRL counts the step first);
        with `action_mask` [N, n] the greedy, the random action and the max are over the valid
        actions."""
        self.env_steps += self.spec.num_envs * self.collective.world.size
        value, greedy = greedy_q(self.q_net(obs), action_mask)
        rows = greedy.shape[-1:]
        random = (self.draws.randint(self.spec.action_dim, rows) if action_mask is None
                  else self.draws.choice(action_mask))
        explore = self.draws.uniform(rows) < self.epsilon(self.env_steps)
        return torch.where(explore, random, greedy), torch.zeros_like(value), value

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """max_a Q(obs, a), detached: V of the Q(λ) returns."""
        return greedy_q(self.q_net(obs))[0]

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Any:
        """`n_epochs` passes of shuffled minibatches, each one gradient step on the squared error
        of Q(s, a) to the Q(λ) returns; the metrics averaged over the steps (a seed batch,
        fields `[S, B, ...]`: each seed its own order and step, one dict per seed)."""
        cfg = self.cfg
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        size = batch.returns.shape[-1]
        active = [True] * by_seed(batch.returns).shape[0]
        rows = []
        for _ in range(cfg.n_epochs):
            perm = self.draws.randperm(size, active)
            rows += [self._minibatch_step(batch, perm[..., i:i + cfg.batch_size])
                     for i in range(0, size, cfg.batch_size)]
        return metric_rows(METRICS, torch.stack(rows).mean(0),
                           {"train/learning_rate": lr,
                            "exploration/epsilon": self.epsilon(self.env_steps)})

    def _minibatch_step(self, batch: RolloutBatch, idx: torch.Tensor) -> torch.Tensor:
        """One gradient step on the rows `idx` (a seed batch: seed k's on its rows `idx[k]`);
        the `METRICS` values as one tensor (a seed batch: `[S, M]`)."""
        at = row_index(idx)
        loss, q = q_lambda_loss(self.q_net, obs_ops.take(batch.obs, at), batch.actions[at],
                                batch.returns[at])
        self.optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norm = grad_norm_step(self.optimizer, self.params, self.cfg.max_grad_norm,
                              self.collective.average_)
        return torch.stack([loss.detach(), q.detach().mean(-1), norm.to(loss.dtype)], -1)

    def state_dict(self) -> dict[str, Any]:
        """Network, optimizer and ε's step count, as plain data."""
        return {"q_net": self.q_net.state_dict(), "optimizer": self.optimizer.state_dict(),
                "env_steps": int(self.env_steps)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        self.q_net.load_state_dict(state["q_net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.env_steps = int(state["env_steps"])


def build(cfg: PQNConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> PQN:
    """Registry builder."""
    return PQN(cfg, spec, device)


def stack(members: list[PQN], streams: Any) -> PQN:
    """A seed batch's PQN (`seed_batch/batch.py` looks for this beside `build`)."""
    return PQN.stack(members, streams)
