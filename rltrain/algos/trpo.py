"""Trust Region Policy Optimization (Schulman et al. 2015) as SB3-contrib's `TRPO`: per rollout
one natural-gradient step of the policy inside a KL trust region, found by conjugate gradient and
a backtracking line search (`algos/natural_gradient.py`), then minibatch Adam epochs of the
value function on the returns."""

from __future__ import annotations

import math
from typing import Any

import torch

from rltrain import obs as obs_ops
from rltrain.algos.base import (
    actor_critic_state,
    explained_variance,
    grad_norm_step,
    load_actor_critic_state,
    make_actor_critic,
    make_noise_clock,
    normalized,
    on_policy_lr,
    policy_std,
    sample_rollout_step,
    set_lr,
)
from rltrain.algos.configs.trpo import TRPOConfig
from rltrain.algos.draws import Draws
from rltrain.algos.natural_gradient import (
    conjugate_gradient,
    fisher_vector_product,
    flat_grad,
    flat_params,
    line_search,
    trust_region_scale,
)
from rltrain.algos.optim import adam
from rltrain.nets.actor_critic import ActorCritic
from rltrain.nets.heads import kl_divergence
from rltrain.parallel.world import SOLO, Solo
from rltrain.types import EnvSpec, Metrics, RolloutBatch


def split_parameters(policy: ActorCritic) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(the policy's parameters: actor encoder, body and head with its log-std; the critic's:
    its encoder and MLP). Only the first take the natural-gradient step."""
    if policy.shared:
        raise ValueError("TRPO needs separate actor and critic encoders (net.share_encoder)")
    actor, critic = [], []
    for name, p in policy.named_parameters():
        (critic if name.startswith("critic") else actor).append(p)
    return actor, critic


class TRPO:
    """TRPO: owns the actor-critic (separate actor and critic networks, as SB3-contrib's
    MlpPolicy) and the critic's Adam; `update` takes a `RolloutBatch`. A seed batch runs each
    seed's TRPO in turn (`runner/members.py`): no `stack`."""

    def __init__(self, cfg: TRPOConfig, spec: EnvSpec, device: torch.device | str = "cpu"):
        self.cfg, self.spec, self.device = cfg, spec, torch.device(device)
        self.policy = make_actor_critic(cfg, spec).to(self.device)
        self.noise_clock = make_noise_clock(cfg)  # gSDE only: new noise at each rollout start
        self.actor_params, self.critic_params = split_parameters(self.policy)
        self.optimizer = adam(self.critic_params, cfg.lr, eps=cfg.adam_eps)
        self.collective: Solo = SOLO  # the ranks of a torchrun job (set by the Runner)
        self.draws: Any = Draws(self.device)

    def act(self, obs: torch.Tensor, action_mask: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (action, log_prob, value) for a rollout step (`action_mask`: valid actions)."""
        return sample_rollout_step(self.policy, obs, self.noise_clock, action_mask, self.draws)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs), detached."""
        return self.policy.value(obs)

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> Metrics:
        """The policy's trust-region step, then the critic's epochs; SB3-contrib's metrics."""
        cfg = self.cfg
        if self.noise_clock is not None:  # the next rollout starts with new gSDE noise
            self.noise_clock.restart()
        lr = on_policy_lr(cfg, progress_remaining)
        set_lr(self.optimizer, lr)
        metrics = self.policy_step(batch)
        metrics["train/value_loss"] = self.critic_epochs(batch)
        metrics["train/learning_rate"] = lr
        ev = explained_variance(batch.values, batch.returns)
        if math.isfinite(ev):  # nan when all returns are equal: omitted, as A2C does
            metrics["train/explained_variance"] = ev
        if self.spec.action_kind == "box":
            metrics["train/std"] = policy_std(self.policy)
        return metrics

    def policy_step(self, batch: RolloutBatch) -> Metrics:
        """One natural-gradient step of the policy (every `sub_sampling_factor`-th row): the
        surrogate L = E[r A] with r = π/π_old, the direction s ≈ (F + damping·I)⁻¹ ∇L by
        conjugate gradient (F: the Hessian of the mean KL(π_old ‖ π), by double backprop),
        scaled to the trust region sqrt(2 δ / sᵀFs) and shrunk by the line search until L
        improves with KL < δ (else the old parameters stay)."""
        cfg, params = self.cfg, self.actor_params
        rows = torch.arange(0, batch.advantages.shape[-1], cfg.sub_sampling_factor,
                            device=batch.advantages.device)
        obs, actions = obs_ops.take(batch.obs, rows), batch.actions[rows]
        old_log_prob, adv = batch.log_probs[rows], batch.advantages[rows]
        masks = None if batch.action_masks is None else batch.action_masks[rows]
        if cfg.normalize_advantage:  # over every rank's rows under torchrun
            adv = normalized(adv, self.collective.moments(adv))
        head, mean = self.policy.head, self.collective.mean
        with torch.no_grad():
            old = self.policy.dist(obs, masks)
        dist = self.policy.dist(obs, masks)
        objective = (adv * (head.log_prob(dist, actions) - old_log_prob).exp()).mean()
        kl = kl_divergence(old, dist).mean()
        grad = flat_grad(objective, params, retain_graph=True)
        self.collective.average_([grad])
        fvp = fisher_vector_product(flat_grad(kl, params, create_graph=True), params,
                                    cfg.cg_damping, self.collective.average_)
        direction = conjugate_gradient(fvp, grad, cfg.cg_max_steps)
        scale = trust_region_scale(direction, fvp(direction), cfg.target_kl)

        @torch.no_grad()
        def evaluate() -> tuple[float, float]:
            new = self.policy.dist(obs, masks)
            surrogate = (adv * (head.log_prob(new, actions) - old_log_prob).exp()).mean()
            return (float(mean(surrogate.detach())),
                    float(mean(kl_divergence(old, new).mean())))

        base = float(mean(objective.detach()))
        accepted, objective_after, kl_after, tries = line_search(
            params, flat_params(params), scale * direction, evaluate, base, cfg.target_kl,
            cfg.line_search_shrinking_factor, cfg.line_search_max_iter)
        return {"train/policy_objective": objective_after, "train/kl_divergence_loss": kl_after,
                "train/is_line_search_success": float(accepted),
                "train/line_search_steps": float(tries)}

    def critic_epochs(self, batch: RolloutBatch) -> float:
        """`n_critic_updates` shuffled passes of Adam steps on (R − V)² over minibatches of
        `batch_size` rows (the last one shorter when it does not divide the rollout, as SB3's);
        returns the mean minibatch loss."""
        cfg = self.cfg
        size = batch.returns.shape[-1]
        losses = []
        for _ in range(cfg.n_critic_updates):
            perm = self.draws.randperm(size)
            for start in range(0, size, cfg.batch_size):
                idx = perm[start:start + cfg.batch_size]
                values = self.policy.value(obs_ops.take(batch.obs, idx))
                loss = (batch.returns[idx] - values).pow(2).mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm_step(self.optimizer, self.critic_params, None,
                               self.collective.average_)
                losses.append(loss.detach())
        return torch.stack(losses).mean().item()

    def state_dict(self) -> dict[str, Any]:
        """Network, the critic's optimizer (and the held gSDE noise) as plain data."""
        return actor_critic_state(self.policy, self.optimizer, self.noise_clock)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`."""
        load_actor_critic_state(self.policy, self.optimizer, self.noise_clock, state)


def build(cfg: TRPOConfig, spec: EnvSpec, device: torch.device | str = "cpu") -> TRPO:
    """Registry builder."""
    return TRPO(cfg, spec, device)
