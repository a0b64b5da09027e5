"""Soft Actor-Critic (Haarnoja et al. 2018, with automatic entropy tuning), for Box actions.

`SAC.stack(members, streams)` is the same algorithm for a batch of seeds (`[S, ...]` networks,
log α `[S]`, each seed's draws from its own stream): every line below serves both forms, and
each seed's Runner reads its seed through `seed_batch/view.py` (`state_dict()` sliced `[k]`).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rltrain import obs as obs_ops
from rltrain.algos.base import check_sde_spec, decay_lrs, make_noise_clock, pick_lr
from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.draws import Draws
from rltrain.algos.off_policy_steps import (
    critic_objective,
    entropy_actor_objective,
    env_rows,
    mse_losses,
    stack_networks,
    td_target,
    uniform_actions,
    update_metrics,
)
from rltrain.algos.optim import adam
from rltrain.algos.seed_optim import stacked_optimizer
from rltrain.algos.steps import EagerSteps, Trained
from rltrain.nets.continuous import SquashedGaussianActor, TwinQ
from rltrain.nets.sde import load_sde_state, sde_state
from rltrain.nets.seeded import NotStackable
from rltrain.nets.spec import ActorCriticSpecs, NetSpec, resolve_nets
from rltrain.types import EnvSpec, TransitionBatch


class SAC:
    """Squashed-Gaussian actor, twin critics with Polyak targets, and a learned temperature."""

    STATE = ("actor", "critic", "critic_target", "actor_optimizer", "critic_optimizer",
             "alpha_optimizer")
    """The networks and optimizers `state_dict()` holds (besides log α and the counters)."""
    COMPILE_PAYS_AFTER = 50_000
    """`compile=auto` from this many planned gradient steps: the compiled update took 0.35-0.67
    of the eager one's time at the presets' shapes, paying a cold compile back within ~10-21k
    steps (benchmarks/results/compiled_update.md)."""

    def __init__(self, cfg: SACConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        actor, critic = self.net_specs()
        check_sde_spec(cfg, spec, cfg.name)
        sde = (cfg.log_std_init, cfg.use_expln) if cfg.use_sde else None
        self.actor = SquashedGaussianActor(actor, spec.action_dim, cfg.log_std_min,
                                           cfg.log_std_max, sde,
                                           cfg.squash_eps).to(self.device)
        # gSDE: new noise every sde_sample_freq steps, else once per train_freq (SB3's rollout)
        self.noise_clock = make_noise_clock(cfg, default_period=cfg.train_freq)
        self.critic = self.make_critic(critic).to(self.device)
        self.critic_target = self.make_critic_target()
        self.start_lrs = {"actor_optimizer": pick_lr(cfg.actor_lr, cfg),
                          "critic_optimizer": pick_lr(cfg.critic_lr, cfg),
                          "alpha_optimizer": pick_lr(cfg.alpha_lr, cfg)}
        self.actor_optimizer = self.make_optimizer(self.actor, self.start_lrs["actor_optimizer"])
        self.critic_optimizer = self.make_optimizer(self.critic,
                                                    self.start_lrs["critic_optimizer"])
        self.log_alpha = torch.tensor(math.log(cfg.alpha), device=self.device,
                                      requires_grad=cfg.autotune_alpha)
        self.alpha_optimizer = adam([self.log_alpha], self.start_lrs["alpha_optimizer"])
        self.target_entropy = (-float(spec.action_dim) if cfg.target_entropy is None
                               else float(cfg.target_entropy))
        self.draws: Any = Draws(self.device)
        self.link_networks()
        self.n_updates = 0  # critic updates so far; the actor updates when it is 0 mod policy_delay
        self._actor_metrics: dict[str, torch.Tensor] = {}  # the latest actor step's

    def net_specs(self) -> ActorCriticSpecs:
        """The actor's and the critics' network settings (`resolve_nets`; a subclass's own, such
        as CrossQ's batch-renormalized ones)."""
        return resolve_nets(self.cfg, self.spec)

    def make_critic_target(self) -> nn.Module | None:
        """The critics' Polyak target: a frozen copy of them (None: an algorithm without one,
        such as CrossQ)."""
        return copy.deepcopy(self.critic).requires_grad_(False)

    def make_optimizer(self, net: nn.Module, lr: float) -> Any:
        """The actor's and the critics' optimizer: Adam with torch's defaults (a subclass's
        own betas, such as CrossQ's)."""
        return adam(net.parameters(), lr)

    def make_critic(self, spec: NetSpec) -> nn.Module:
        """The critics (`spec`: their network settings): SAC's twin Q (a subclass's own, such
        as TQC's quantile ensemble)."""
        return TwinQ(spec, self.spec.action_dim)

    def link_networks(self) -> None:
        """What follows from the networks (the evaluated policy, what the update trains with
        which optimizer, `algos/steps.py`): set again when `stack` replaces them with the seeds'
        stacked ones."""
        self.policy = self.actor
        trained = {"critic": Trained(self.critic, self.critic_optimizer),
                   "actor": Trained(self.actor, self.actor_optimizer)}
        frozen: dict[str, Any] = {"critic_target": self.critic_target}
        if self.cfg.autotune_alpha:
            trained["log_alpha"] = Trained(self.log_alpha, self.alpha_optimizer)
        else:
            frozen["log_alpha"] = self.log_alpha
        self.steps = EagerSteps(trained, frozen)
        self.graph: Any = None  # the compiled `learn` (`algos/compiled.py`), when one is used

    @classmethod
    def stack(cls, members: list[SAC], streams: Any) -> SAC:
        """The seeds' `members` as one batch (drawing from `streams`, one per seed); gSDE's
        held noise does not stack (NotStackable: the batch runs the members in turn)."""
        if members[0].noise_clock is not None:
            raise NotStackable("gSDE (algo.use_sde)")
        batch = copy.copy(members[0])
        batch.draws = streams
        stack_networks(batch, members, ("actor", "critic"), ("critic_target",))
        batch.log_alpha = torch.stack([m.log_alpha.detach() for m in members]).requires_grad_(
            batch.cfg.autotune_alpha)
        batch.alpha_optimizer = stacked_optimizer([batch.log_alpha],
                                                  [m.alpha_optimizer for m in members])
        batch._actor_metrics = {}  # until the batch's first actor step
        batch.link_networks()
        return batch

    @property
    def alpha(self) -> torch.Tensor:
        """exp(log α), detached (`[S]` in a seed batch)."""
        return self.log_alpha.detach().exp()

    def _noise(self, rows: int) -> torch.Tensor:
        """The reparameterization's standard normal draws `[rows, A]` (a seed batch:
        `[S, rows, A]`, each seed's from its own stream)."""
        return self.draws.normal((rows, self.spec.action_dim))

    def random_actions(self, num_envs: int) -> torch.Tensor:
        """Uniform warm-up actions in [-1, 1] `[N, A]` (a seed batch: `[S, N, A]`)."""
        return uniform_actions(self.draws, num_envs, self.spec.action_dim)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, global_step: int) -> torch.Tensor:
        """A sample of the squashed-Gaussian policy, in [-1, 1] (gSDE: with the held noise)."""
        if self.noise_clock is None:
            return self.actor.act(obs, False, self._noise(env_rows(obs, self.actor)))
        if self.noise_clock.tick():
            self.actor.sde.resample(obs_ops.rows(obs))
        return self.actor.explore(obs)

    def update(self, batch: TransitionBatch, global_step: int) -> Any:
        """Critic step; actor and α steps every `policy_delay`-th call; then a soft target
        update (`learn`, compiled when `graph` is set). A metrics dict (a seed batch: one per
        seed, each on its own minibatch `[S, B, ...]`).

        Actor metrics repeat their latest values on steps that skip the actor.
        """
        rates = decay_lrs(self, global_step)
        with_actor = self.n_updates % self.cfg.policy_delay == 0
        rows = batch.rewards.shape[-1]
        noise = (self._noise(rows), self._noise(rows) if with_actor else None)
        learn = self.graph or functools.partial(self.learn, self.steps)
        losses, q, actor = learn(batch, noise, with_actor)
        if actor is not None:
            self._actor_metrics = {"train/actor_loss": actor[0], "train/entropy": actor[1]}
        self.n_updates += 1
        return update_metrics(losses, q, self._actor_metrics, rates, {"train/alpha": self.alpha})

    def learn(self, steps: Any, batch: TransitionBatch, noise: tuple[Any, Any],
              with_actor: bool) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """The update's math, once for both forms of `steps` (`algos/steps.py`): the critic step
        towards `soft_target`, the actor and α step when `with_actor`, the target update.
        `noise`: the standard normal draws of a' ~ π(s') and of the actor step's actions.
        Returns (each critic's loss `[..., E]`, Q(s, a) `[..., E, B]`, (actor loss, entropy)
        or None), detached."""
        alpha = steps.value("log_alpha").exp()
        with torch.no_grad():
            next_action = steps.net("actor")(batch.next_obs, noise=noise[0])
        y = self.soft_target(steps.net("critic_target"), batch, next_action, alpha)
        losses, q = steps.minimize(("critic",), lambda critic: self.critic_objective(
            critic, batch, y))
        actor = self.actor_learn(steps, batch.obs, noise[1]) if with_actor else None
        steps.polyak("critic_target", "critic", self.cfg.tau)
        return losses, q, actor

    def critic_objective(self, critic: Any, batch: TransitionBatch,
                         y: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, Any]]:
        """The critics' loss against `y` (`critic_objective`: MSE; a subclass's own, such as
        TQC's quantile loss): (its sum, (each critic's loss, Q(s, a) `[..., E, B]`))."""
        return critic_objective(critic, batch, y, mse_losses)

    def actor_q(self, critic: Any) -> Callable[[Any, torch.Tensor], torch.Tensor]:
        """The critic values the actor step maximizes, `[..., E, B]` (a subclass's own, such
        as TQC's mean quantile)."""
        return critic

    @torch.no_grad()
    def soft_target(self, critic_target: Any, batch: TransitionBatch,
                    next_action: tuple[torch.Tensor, torch.Tensor],
                    alpha: torch.Tensor) -> torch.Tensor:
        """SAC's target (`sac_target`) from a' ~ π(s') and its log π (a subclass's own)."""
        return sac_target(critic_target, batch, *next_action, alpha, self.cfg.gamma)

    @torch.no_grad()
    def target(self, batch: TransitionBatch) -> torch.Tensor:
        """y = r + γ (1 − terminated) (min_i Q'_i(s', a') − α log π(a'|s')), a' ~ π(s'); [B]."""
        next_action = self.actor(batch.next_obs, noise=self._noise(batch.rewards.shape[-1]))
        return self.soft_target(self.critic_target, batch, next_action, self.alpha)

    def actor_learn(self, steps: Any, obs: Any, noise: torch.Tensor) -> Any:
        """One actor step and, when α is tuned, one temperature step in the same gradient
        (`entropy_actor_objective`): (actor loss, entropy), detached."""
        tune = self.cfg.autotune_alpha
        critic = self.actor_q(steps.net("critic"))

        def objective(actor: Any, log_alpha: Any = None) -> tuple[torch.Tensor, Any]:
            return entropy_actor_objective(
                functools.partial(actor, noise=noise), critic, obs,
                steps.value("log_alpha") if log_alpha is None else log_alpha, tune,
                self.target_entropy)
        return steps.minimize(("actor", "log_alpha") if tune else ("actor",), objective)

    def state_dict(self) -> dict[str, Any]:
        """Networks, target, optimizers, log α and the update counter as plain data."""
        state: dict[str, Any] = {name: getattr(self, name).state_dict() for name in self.STATE}
        state["log_alpha"] = self.log_alpha.detach().clone()
        state["n_updates"] = self.n_updates
        if self.noise_clock is not None:
            state["sde"] = sde_state(self.actor.sde, self.noise_clock)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        for name in self.STATE:
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.n_updates = int(state["n_updates"])
        if self.noise_clock is not None and isinstance(state.get("sde"), dict):
            load_sde_state(self.actor.sde, self.noise_clock, state["sde"])


# ---- SAC's math, written once: the networks are callables and α a tensor, so a seed batch's
# stacked ones (`[S, ...]` inputs, α `[S]`) run the same lines; the critics' ensemble is the
# dimension before the rows (-2), losses reduce the last one. The actor and temperature step,
# over any actor: `algos/off_policy_steps.py` `entropy_actor_objective` -------------------------

@torch.no_grad()
def sac_target(critic_target: Callable[[Any, torch.Tensor], torch.Tensor],
               batch: TransitionBatch, next_action: torch.Tensor, next_log_prob: torch.Tensor,
               alpha: torch.Tensor, gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) (min_i Q'_i(s', a') − α log π(a'|s')), a' ~ π(s')."""
    next_q = critic_target(batch.next_obs, next_action).min(-2).values
    soft_value = next_q - alpha.unsqueeze(-1) * next_log_prob
    return td_target(batch.rewards, soft_value, batch.terminated, gamma)


def build(cfg: SACConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> SAC:
    """Registry builder."""
    return SAC(cfg, spec, device)


def stack(members: list[SAC], streams: Any) -> SAC:
    """A seed batch's SAC (`seed_batch/batch.py` looks for this beside `build`)."""
    return SAC.stack(members, streams)
