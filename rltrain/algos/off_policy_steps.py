"""The off-policy gradient steps every algorithm with critics shares: target-network updates,
TD targets, a critic ensemble's step under the algorithm's loss, and the deterministic (DDPG,
TD3) and entropy-regularized (SAC) actor steps. Each works on one network or on a seed batch's
stacked ones (a leading `[S]`), so both forms run the same math.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from rltrain.algos.optim import Optimizer
from rltrain.types import Metrics, TransitionBatch

# target module -> (target params, source params, target buffers, source buffers); walking the
# module tree on every call cost ~0.3 ms per SAC update (profiled), the tensors never change.
_POLYAK_PAIRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.no_grad()
def polyak_update(target: Any, source: Any, tau: float) -> None:
    """θ_target ← τ θ_source + (1 − τ) θ_target (τ = 1 copies); buffers (BatchNorm statistics)
    are copied. `target`, `source`: `nn.Module`s, or a seed batch's stacked networks (whatever
    has `parameters()` and `buffers()`), so every S updates its targets alike."""
    pairs = _POLYAK_PAIRS.get(target)
    if pairs is None or pairs[4] is not source:
        pairs = (list(target.parameters()), list(source.parameters()), list(target.buffers()),
                 list(source.buffers()), source)
        _POLYAK_PAIRS[target] = pairs
    t_params, s_params, t_bufs, s_bufs, _ = pairs
    soft_update_(t_params, s_params, tau)
    if t_bufs:
        torch._foreach_copy_(t_bufs, s_bufs)


@torch.no_grad()
def soft_update_(target: list[torch.Tensor], source: list[torch.Tensor], tau: float) -> None:
    """θ_target ← τ θ_source + (1 − τ) θ_target, tensor by tensor (τ = 1 copies): a network's
    parameters, or a seed batch's stacked ones."""
    if tau >= 1.0:
        torch._foreach_copy_(target, source)
    else:
        torch._foreach_lerp_(target, source, tau)


def td_target(reward: torch.Tensor, next_value: torch.Tensor, terminated: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """y = r + γ (1 − terminated) V(s'); truncated transitions keep the bootstrap."""
    return reward + gamma * (1.0 - terminated) * next_value


def twin_critic_step(critic: nn.Module, optimizer: Optimizer, batch: TransitionBatch,
                     y: torch.Tensor) -> Metrics:
    """One MSE step of both critics of a `TwinQ` (output [2, B]) towards the TD target `y` [B]."""
    losses, q = critic_step(critic, optimizer, batch, y)
    c1, c2 = losses.tolist()
    return {"train/critic1_loss": c1, "train/critic2_loss": c2, "train/q_loss": (c1 + c2) / 2,
            "train/mean_q": q.mean().item()}


def mse_losses(q: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each critic's mean-squared TD error: Q `[..., E, B]` against `y` `[..., B]` -> `[..., E]`."""
    return (q - y.unsqueeze(-2)).pow(2).mean(-1)


CriticLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(the critics' output `[..., E, B, *head]`, the algorithm's target) -> each critic's loss
`[..., E]`: `mse_losses`, or a quantile or distributional critic's own."""


def critic_step(critic: Callable[[Any, torch.Tensor], torch.Tensor], optimizer: Any,
                batch: TransitionBatch, y: torch.Tensor, loss: CriticLoss = mse_losses,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of an ensemble of critics (output `[..., E, B, *head]`: a single run's `[E, B]`,
    a seed batch's `[S, E, B]`, a quantile head's `[E, B, M]`) towards the target `y` under
    `loss` (MSE by default, `y` `[..., B]`); returns (each critic's loss `[..., E]`, Q(s, a)),
    detached."""
    q = critic(batch.obs, batch.actions)
    losses = loss(q, y)
    optimizer.zero_grad(set_to_none=True)
    losses.sum().backward()  # seeds and critics share no parameter: each its own gradient
    optimizer.step()
    return losses.detach(), q.detach()


def deterministic_actor_step(actor: Callable[[Any], torch.Tensor],
                             critic: Callable[[Any, torch.Tensor], torch.Tensor],
                             optimizer: Any, obs: Any, params: list[torch.Tensor]) -> torch.Tensor:
    """DDPG's and TD3's actor step: −Q1(s, μ(s)) (the first critic only, as in the TD3 paper),
    one optimizer step of `params` (the actor's; the critics get no gradient); the loss,
    detached (`[...]`: per seed in a seed batch)."""
    loss = -critic(obs, actor(obs)).select(-2, 0).mean(-1)
    optimizer.zero_grad(set_to_none=True)
    loss.sum().backward(inputs=params)
    optimizer.step()
    return loss.detach()


def entropy_actor_step(actor: Callable[[Any], tuple[torch.Tensor, torch.Tensor]],
                       critic: Callable[[Any, torch.Tensor], torch.Tensor], optimizer: Any,
                       obs: Any, params: list[torch.Tensor], log_alpha: torch.Tensor,
                       alpha_optimizer: Any | None, target_entropy: float,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """SAC's actor step over any actor (`actor(obs)`: a reparameterized (action, log π)) and
    critic (`[..., E, B]`): the loss α log π − min_i Q_i(s, a) steps `params` (the actor's);
    with `alpha_optimizer` (a tuned temperature) the loss −log α (log π + H_target) steps
    `log_alpha` in the same backward. Returns (actor loss, entropy), detached (`[...]`).

    The α loss uses the detached log π, and the actor loss the detached α, so summing them
    leaves each gradient what it would be alone (α grows when the entropy is below the
    target); the critics get no gradient (`inputs=`).
    """
    action, log_prob = actor(obs)
    alpha = log_alpha.detach().exp().unsqueeze(-1)
    loss = (alpha * log_prob - critic(obs, action).min(-2).values).mean(-1)
    total, inputs = loss, params
    if alpha_optimizer is not None:
        total = loss - (log_alpha.unsqueeze(-1) * (log_prob.detach() + target_entropy)).mean(-1)
        inputs = [*params, log_alpha]
        alpha_optimizer.zero_grad(set_to_none=True)
    optimizer.zero_grad(set_to_none=True)
    total.sum().backward(inputs=inputs)
    optimizer.step()
    if alpha_optimizer is not None:
        alpha_optimizer.step()
    return loss.detach(), -log_prob.detach().mean(-1)
