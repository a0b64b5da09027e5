"""The off-policy gradient steps every algorithm with critics shares: target-network updates,
TD targets, a critic ensemble's step under the algorithm's loss, and the deterministic (DDPG,
TD3) and entropy-regularized (SAC) actor steps. Each works on one network or on a seed batch's
stacked ones (a leading `[S]`), so both forms run the same math.

Also what the algorithms with a continuous actor share around those steps: warm-up actions,
an update's metrics, a seed batch's stacked networks and optimizers (`stack_networks`), and
DDPG's and TD3's common half (`DeterministicActorCritic`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rltrain import obs as obs_ops
from rltrain.algos.base import decay_lrs, pick_lr
from rltrain.algos.draws import Draws
from rltrain.algos.optim import adam
from rltrain.algos.seed_optim import stacked_optimizer
from rltrain.algos.steps import EagerSteps, Trained, polyak_update
from rltrain.nets import seeded
from rltrain.nets.continuous import DeterministicActor, add_gaussian_noise
from rltrain.nets.spec import NetSpec, resolve_nets
from rltrain.types import EnvSpec, Metrics, TransitionBatch


def td_target(reward: torch.Tensor, next_value: torch.Tensor, terminated: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) V(s'); truncated transitions keep the bootstrap."""
    return reward + gamma * (1.0 - terminated) * next_value


def update_target_(target: nn.Module, online: nn.Module, cfg: Any, global_step: int,
                   next_update: int) -> int:
    """A Q-learner's target-network update (`cfg`: its `tau` and `target_update_interval`;
    `polyak_update`: buffers are copied too): a Polyak blend every step when tau < 1, else a
    copy once `global_step` reaches `next_update`; returns the step of the next copy."""
    if cfg.tau < 1.0:
        polyak_update(target, online, cfg.tau)
    elif global_step >= next_update:
        polyak_update(target, online, 1.0)
        interval = cfg.target_update_interval
        return (global_step // interval + 1) * interval
    return next_update


def linear_schedule(step: int, initial: float, final: float, decay_steps: int) -> float:
    """Linear from `initial` at step 0 to `final` at `decay_steps`, then constant (ε-greedy)."""
    if decay_steps <= 0:
        return final
    frac = min(1.0, max(0.0, step / decay_steps))
    return initial + frac * (final - initial)


def mse_losses(q: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each critic's mean-squared TD error: Q `[..., E, B]` against `y` `[..., B]` -> `[..., E]`."""
    return (q - y.unsqueeze(-2)).pow(2).mean(-1)


def quantile_huber_loss(current: torch.Tensor, target: torch.Tensor,
                        sum_over_quantiles: bool) -> torch.Tensor:
    """The quantile-regression Huber loss (κ = 1) of QR-DQN and TQC, as SB3-contrib's
    `quantile_huber_loss` with its default midpoints τ̂_i = (2i + 1) / 2M: the quantiles
    `current` `[..., M]` against the target samples `target` `[..., K]` (leading dimensions
    broadcast: a TQC critic ensemble's `[..., E, B, M]` against `[..., 1, B, K]`), each pair
    u = target_k − current_i weighted |τ̂_i − 1{u < 0}| · Huber(u). Reduces the pairs only:
    `sum_over_quantiles` sums over the M quantiles and averages over the K targets (QR-DQN's,
    SB3-contrib's default), else averages over both (TQC's, as SB3-contrib's TQC calls it);
    `[...]` (the rows, critics, seeds), which the caller averages as SB3-contrib's `.mean()`."""
    m = current.shape[-1]
    tau = ((torch.arange(m, device=current.device, dtype=current.dtype) + 0.5) / m).unsqueeze(-1)
    # the pairs [..., M (quantile), K (target)], as views; Huber(u) in torch's one fused kernel
    # (3x faster than writing it out, forward and backward, with equal values and gradients)
    cur, tgt = torch.broadcast_tensors(current.unsqueeze(-1), target.unsqueeze(-2))
    huber = F.huber_loss(cur, tgt, reduction="none", delta=1.0)
    below = tgt.detach() < cur.detach()  # u = target − current < 0
    loss = torch.where(below, 1.0 - tau, tau) * huber  # |τ̂_i − 1{u < 0}| · Huber(u)
    return loss.sum(-2).mean(-1) if sum_over_quantiles else loss.mean((-2, -1))


CriticLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(the critics' output `[..., E, B, *head]`, the algorithm's target) -> each critic's loss
`[..., E]`: `mse_losses`, or a quantile or distributional critic's own."""


def critic_objective(critic: Callable[[Any, torch.Tensor], torch.Tensor], batch: TransitionBatch,
                     y: torch.Tensor, loss: CriticLoss = mse_losses,
                     ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """An ensemble of critics (output `[..., E, B, *head]`: a single run's `[E, B]`, a seed
    batch's `[S, E, B]`, a quantile head's `[E, B, M]`) against the target `y` under `loss`
    (MSE by default, `y` `[..., B]`): (the sum to descend, (each critic's loss `[..., E]`,
    Q(s, a))), for `steps.minimize` (`algos/steps.py`). Seeds and critics share no parameter:
    the sum gives each its own gradient."""
    q = critic(batch.obs, batch.actions)
    losses = loss(q, y)
    return losses.sum(), (losses, q)


def deterministic_actor_objective(actor: Callable[[Any], torch.Tensor],
                                  critic: Callable[[Any, torch.Tensor], torch.Tensor],
                                  obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """DDPG's and TD3's actor loss −Q1(s, μ(s)) (the first critic only, as in the TD3 paper):
    (its sum to descend, the loss `[...]`: per seed in a seed batch)."""
    loss = -critic(obs, actor(obs)).select(-2, 0).mean(-1)
    return loss.sum(), loss


def entropy_actor_objective(actor: Callable[[Any], tuple[torch.Tensor, torch.Tensor]],
                            critic: Callable[[Any, torch.Tensor], torch.Tensor], obs: Any,
                            log_alpha: torch.Tensor, tune_alpha: bool, target_entropy: float,
                            ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """SAC's actor loss over any actor (`actor(obs)`: a reparameterized (action, log π)) and
    critic (`[..., E, B]`): α log π − min_i Q_i(s, a); with `tune_alpha` plus the temperature's
    −log α (log π + H_target), so one gradient serves both steps. Returns (the sum to descend,
    (actor loss, entropy) `[...]`).

    The α loss uses the detached log π, and the actor loss the detached α, so summing them
    leaves each gradient what it would be alone (α grows when the entropy is below the
    target); the critics get none (`steps.minimize` steps only the actor and log α).
    """
    action, log_prob = actor(obs)
    alpha = log_alpha.detach().exp().unsqueeze(-1)
    loss = (alpha * log_prob - critic(obs, action).min(-2).values).mean(-1)
    total = loss
    if tune_alpha:
        total = loss - (log_alpha.unsqueeze(-1) * (log_prob.detach() + target_entropy)).mean(-1)
    return total.sum(), (loss, -log_prob.detach().mean(-1))


# ---- around the steps: what SAC, TD3 and DDPG share, a single run (`[B, ...]`) and a seed
# batch (`[S, B, ...]`: `<Algo>.stack`) alike ----------------------------------------------------

def uniform_actions(draws: Any, num_envs: int, action_dim: int) -> torch.Tensor:
    """Uniform actions in [-1, 1] `[N, A]` before learning starts, as `runner/off_policy.py`
    `random_actions` draws them for a Box space (`draws`: the algorithm's `Draws`; a seed
    batch's streams give `[S, N, A]`, each seed's from its own)."""
    return draws.uniform((num_envs, action_dim)) * 2.0 - 1.0


def env_rows(obs: Any, net: nn.Module) -> int:
    """How many env rows `obs` holds as `net` takes it: `[N, ...]` (a dict of such for Dict
    observations), or, for a seed batch's stacked network (`nets/seeded.py`: it has `seeds`),
    `[S, N, ...]`."""
    return obs_ops.tensors(obs)[0].shape[1 if hasattr(net, "seeds") else 0]


@torch.no_grad()
def explore(actor: Callable[[Any], torch.Tensor], obs: Any, std: float,
            draws: Any) -> torch.Tensor:
    """DDPG's and TD3's acting: μ(s) plus clipped Gaussian noise N(0, std²) from `draws`, in
    [-1, 1]; no draw when `std` is 0."""
    action = actor(obs)
    if std <= 0:
        return action
    return add_gaussian_noise(action, std, draws.like("normal", action))


def update_metrics(losses: torch.Tensor, q: torch.Tensor, *parts: dict[str, Any]) -> Any:
    """An update's metrics: each critic's loss (`losses` `[..., E]`), their mean
    (`train/q_loss`) and the mean Q (`q` `[..., E, B]`), then `parts` in order (a tensor `[...]`
    per seed, or a number all seeds share). One dict for a single run, or one per seed for a
    seed batch (`losses` `[S, E]`), read from the device at once."""
    named = {key: value for part in parts for key, value in part.items()}
    per_seed = [value.unsqueeze(-1) for value in named.values() if isinstance(value, torch.Tensor)]
    table = torch.cat([losses, q.mean((-2, -1)).unsqueeze(-1), *per_seed], -1).tolist()
    n = losses.shape[-1]

    def row(values: list[float]) -> Metrics:
        out = {f"train/critic{i + 1}_loss": v for i, v in enumerate(values[:n])}
        out["train/q_loss"] = sum(values[:n]) / n  # on the host, as always logged
        out["train/mean_q"] = values[n]
        rest = iter(values[n + 1:])
        out.update({key: next(rest) if isinstance(value, torch.Tensor) else value
                    for key, value in named.items()})
        return out

    return row(table) if losses.dim() == 1 else [row(values) for values in table]


def stack_networks(batch: Any, members: list[Any], trained: tuple[str, ...],
                   targets: tuple[str, ...]) -> None:
    """A seed batch's networks on `batch` (a copy of `members[0]`): each one named in `trained`
    and `targets` the members' stacked `[S, ...]` (`nets/seeded.py`; targets without gradients),
    and each trained one's optimizer `<name>_optimizer` the members' stacked over its
    parameters."""
    for name in (*trained, *targets):
        setattr(batch, name, seeded.stack_modules([getattr(m, name) for m in members],
                                                  requires_grad=name in trained))
    for name in trained:
        optimizer = f"{name}_optimizer"
        setattr(batch, optimizer, stacked_optimizer(list(getattr(batch, name).parameters()),
                                                    [getattr(m, optimizer) for m in members]))


class DeterministicActorCritic:
    """DDPG's and TD3's common half: a deterministic actor and its critics (`critic(net spec)`
    builds them) with Polyak targets and an Adam each, acting with clipped Gaussian noise, the
    actor step with the target updates after it, their state, and their seed-batch form.

    `stack(members, streams)` is the same algorithm for a batch of seeds: its networks and
    optimizers are the members' stacked `[S, ...]`, its draws each seed's own stream, and every
    method takes and returns a leading seed dimension; each seed's Runner reads its seed through
    `seed_batch/view.py` (its `state_dict()` sliced `[k]`). A subclass says when the actor steps
    (`with_actor`), what the critics regress to (`target_of`) and what that draws
    (`target_noise`).
    """

    STATE = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer",
             "critic_optimizer")
    COUNTERS: tuple[str, ...] = ()
    """What its `state_dict` holds besides `STATE`: counts the seeds of a batch share."""
    COMPILE_PAYS_AFTER = 100_000
    """`compile=auto` from this many planned gradient steps: TD3's compiled update took 0.51 of
    an already short step at Pendulum's shapes (0.88 at Hopper's 400x300), paying a cold compile
    back after ~29-44k steps (benchmarks/results/compiled_update.md)."""

    def __init__(self, cfg: Any, spec: EnvSpec, device: torch.device | str,
                 critic: Callable[[NetSpec], nn.Module]):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        actor_spec, critic_spec = resolve_nets(cfg, spec)
        self.actor = DeterministicActor(actor_spec, spec.action_dim).to(self.device)
        self.critic = critic(critic_spec).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.start_lrs = {"actor_optimizer": pick_lr(cfg.actor_lr, cfg),
                          "critic_optimizer": pick_lr(cfg.critic_lr, cfg)}
        self.actor_optimizer = adam(self.actor.parameters(), self.start_lrs["actor_optimizer"])
        self.critic_optimizer = adam(self.critic.parameters(), self.start_lrs["critic_optimizer"])
        self.draws: Any = Draws(self.device)
        self._actor_loss: torch.Tensor | float = 0.0  # the latest actor step's
        self.link_networks()

    def link_networks(self) -> None:
        """What follows from the networks (the evaluated policy, what the update trains with
        which optimizer, `algos/steps.py`): set again when `stack` replaces them with the
        seeds' stacked ones."""
        self.policy = self.actor
        self.steps = EagerSteps({"critic": Trained(self.critic, self.critic_optimizer),
                                 "actor": Trained(self.actor, self.actor_optimizer)},
                                {"critic_target": self.critic_target,
                                 "actor_target": self.actor_target})
        self.graph: Any = None  # the compiled `learn` (`algos/compiled.py`), when one is used

    @classmethod
    def stack(cls, members: list[Any], streams: Any) -> Any:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed)."""
        batch = copy.copy(members[0])
        batch.draws = streams
        stack_networks(batch, members, ("actor", "critic"), ("actor_target", "critic_target"))
        batch._actor_loss = 0.0  # until the batch's first actor step
        batch.link_networks()
        return batch

    def random_actions(self, num_envs: int) -> torch.Tensor:
        """Uniform warm-up actions in [-1, 1] `[N, A]` (a seed batch: `[S, N, A]`)."""
        return uniform_actions(self.draws, num_envs, self.spec.action_dim)

    @torch.no_grad()
    def act(self, obs: Any, global_step: int) -> torch.Tensor:
        """Actor action plus clipped Gaussian exploration noise, in [-1, 1]."""
        return explore(self.actor, obs, self.cfg.action_noise, self.draws)

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """One critic step; when `with_actor` (a subclass's rule) an actor step and target
        updates (`learn`, compiled when `graph` is set). A metrics dict (a seed batch: one per
        seed, each on its own minibatch `[S, B, ...]`); `train/actor_loss` repeats the latest
        actor loss on steps that skip the actor."""
        rates = decay_lrs(self, global_step)
        with_actor = self.with_actor()
        noise = self.target_noise(batch)
        learn = self.graph or functools.partial(self.learn, self.steps)
        losses, q, actor_loss = learn(batch, noise, with_actor)
        if actor_loss is not None:
            self._actor_loss = actor_loss
        return update_metrics(losses, q, {"train/actor_loss": self._actor_loss}, rates)

    def learn(self, steps: Any, batch: TransitionBatch, noise: Any,
              with_actor: bool) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """The update's math, once for both forms of `steps` (`algos/steps.py`): the critic
        step towards `target_of` (`noise`: its draws, or None), then, `with_actor`, the actor
        step (`deterministic_actor_objective`) and a soft update of both targets. Returns
        (each critic's loss, Q(s, a), the actor loss or None), detached."""
        y = self.target_of(steps, batch, noise)
        losses, q = steps.minimize(("critic",), lambda critic: critic_objective(
            critic, batch, y))
        actor_loss = None
        if with_actor:
            critic = steps.net("critic")
            actor_loss = steps.minimize(("actor",), lambda actor: deterministic_actor_objective(
                actor, critic, batch.obs))
            steps.polyak("critic_target", "critic", self.cfg.tau)
            steps.polyak("actor_target", "actor", self.cfg.tau)
        return losses, q, actor_loss

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, optimizers (and `COUNTERS`) as plain data."""
        state: dict[str, Any] = {name: getattr(self, name).state_dict() for name in self.STATE}
        state.update({name: getattr(self, name) for name in self.COUNTERS})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        for name in self.STATE:
            getattr(self, name).load_state_dict(state[name])
        for name in self.COUNTERS:
            setattr(self, name, int(state[name]))
