"""DQN over a batch of seeds: `algos/dqn.py`'s target, loss and target-network update
(`dqn_target`, `dqn_loss`, `update_target_`) over stacked networks.

The members are ordinary `DQN` objects, one per seed. The online and target Q-networks are
trained stacked (`StackedQ`, `SeedAdam`, per-seed gradient clipping); ε-greedy exploration,
warm-up actions and replay sampling draw from each seed's own stream. Every seed steps in
lockstep, so the learning-rate and ε schedules and the target-update steps are the same for all.
`sync` copies each seed's networks, optimizer state and target-update counter into its member.
"""

from __future__ import annotations

import torch

from rltrain.algos.base import grad_norm_step, set_lr
from rltrain.algos.dqn import DQN, dqn_loss, dqn_target, update_target_
from rltrain.algos.optim import stacked_optimizer
from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.q import masked_argmax
from rltrain.nets.seeded import stack_modules
from rltrain.seeds.rng import SeedStreams
from rltrain.types import Metrics, TransitionBatch


class SeedDQN:
    """`act`, `random_actions` and `update` for S DQN members at once (inputs `[S, ...]`)."""

    def __init__(self, members: list[DQN], streams: SeedStreams):
        if not all(isinstance(m, DQN) for m in members):
            raise UserError("a DQN seed batch needs DQN members")
        self.members, self.streams = members, streams
        self.cfg, self.n_actions = members[0].cfg, members[0].spec.action_dim
        self.q = stack_modules([m.q_net for m in members])
        self.q_target = stack_modules([m.q_target for m in members], requires_grad=False)
        self.params = list(self.q.parameters())
        self.optimizer = stacked_optimizer(self.params, [m.optimizer for m in members])
        self.next_target_update = members[0].next_target_update

    def random_actions(self, num_envs: int, masks: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform actions `[S, N]` (among each row's valid ones when `masks` `[S, N, n]` is
        given), each seed from its own stream, as `runner/off_policy.random_actions` draws them."""
        if masks is not None:
            return torch.stack([torch.multinomial(m.float(), 1, generator=g).squeeze(-1)
                                for m, g in zip(masks, self.streams.generators, strict=True)])
        return torch.stack([torch.randint(0, self.n_actions, (num_envs,), generator=g,
                                          device=self.streams.device)
                            for g in self.streams.generators])

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int,
            masks: torch.Tensor | None = None) -> torch.Tensor:
        """ε-greedy actions `[S, N]`; each seed draws its random actions, then its coins; with
        `masks` `[S, N, n]` the greedy and the random actions are valid ones."""
        greedy = masked_argmax(self.q(obs), masks)
        rows = greedy.shape[1]
        random = self.random_actions(rows, masks)
        coins = torch.stack([torch.rand((rows,), generator=g, device=self.streams.device)
                             for g in self.streams.generators])
        return torch.where(coins < self.members[0].epsilon(global_step), random, greedy)

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """One Huber-loss step of every seed on its own minibatch (`batch` fields `[S, B, ...]`),
        then the target update when due; one metrics dict per seed."""
        cfg = self.cfg
        lr = self.members[0].learning_rate(global_step)
        set_lr(self.optimizer, lr)
        target = dqn_target(self.q, self.q_target, batch, cfg)
        loss, q = dqn_loss(self.q, batch, target)  # [S]
        self.optimizer.zero_grad()
        loss.sum().backward()  # seeds share no parameter: each gets its own loss's gradient
        norms = grad_norm_step(self.optimizer, self.params, cfg.max_grad_norm)
        self.next_target_update = update_target_(list(self.q_target.parameters()), list(self.q.parameters()),
                                                 cfg, global_step, self.next_target_update)
        rows = torch.stack([loss.detach(), q.detach().mean(-1), target.mean(-1), norms], 1).tolist()
        eps = self.members[0].epsilon(global_step)
        return [{"train/q_loss": r[0], "train/mean_q": r[1], "train/td_target_mean": r[2],
                 "train/grad_norm": r[3], "train/learning_rate": lr, "exploration/epsilon": eps}
                for r in rows]

    def sync(self) -> None:
        """Copy each seed's networks, optimizer state and target counter into its member."""
        for k, algo in enumerate(self.members):
            seeded.copy_to(self.q, k, algo.q_net)
            seeded.copy_to(self.q_target, k, algo.q_target)
            self.optimizer.copy_to(k, algo.optimizer)
            algo.next_target_update = self.next_target_update
