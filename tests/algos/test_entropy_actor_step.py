"""`entropy_actor_objective` under `EagerSteps`, SAC's actor and temperature step, over an actor that is not SAC's: a
toy state-independent Gaussian with a learnable mean and log σ."""

from __future__ import annotations

import math

import torch
from torch import nn

from rltrain.algos.off_policy_steps import entropy_actor_objective
from rltrain.algos.optim import adam
from rltrain.algos.steps import EagerSteps, Trained

BEST_ACTION = 0.5
LOG_ALPHA = torch.tensor(math.log(0.05)).item()
"""The starting log α, as float32 stores it."""


class ToyGaussian(nn.Module):
    """a ~ N(μ, σ²) for every row, reparameterized: (action [B, 1], log π(a) [B])."""

    def __init__(self) -> None:
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(1))
        self.log_std = nn.Parameter(torch.zeros(1))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.randn(obs.shape[0], 1)
        action = self.mean + self.log_std.exp() * noise
        log_prob = (-0.5 * noise.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return action, log_prob


class PeakedCritic(nn.Module):
    """Two critics, Q_i(s, a) = −c_i (a − 0.5)²; a parameter of its own that must stay put."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([[1.0], [2.0]]))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return -self.scale * (action[:, 0] - BEST_ACTION).pow(2)  # [2, B]


def _train(steps: int, tuned: bool, target_entropy: float = 0.0):
    torch.manual_seed(0)
    actor, critic = ToyGaussian(), PeakedCritic()
    log_alpha = torch.tensor(LOG_ALPHA, requires_grad=tuned)
    optimizer, alpha_optimizer = adam(actor.parameters(), 0.05), adam([log_alpha], 0.05)
    obs = torch.zeros(256, 3)
    steps_ = EagerSteps({"actor": Trained(actor, optimizer),
                         "log_alpha": Trained(log_alpha, alpha_optimizer)}, {})
    names = ("actor", "log_alpha") if tuned else ("actor",)
    for _ in range(steps):
        loss, entropy = steps_.minimize(names, lambda actor, alpha=log_alpha: (
            entropy_actor_objective(actor, critic, obs, alpha, tuned, target_entropy)))
    return actor, critic, log_alpha, loss, entropy


def test_the_actor_climbs_the_critics_and_the_critics_get_no_gradient():
    actor, critic, log_alpha, loss, entropy = _train(200, tuned=False)
    assert abs(actor.mean.item() - BEST_ACTION) < 0.05
    assert critic.scale.grad is None and critic.scale.tolist() == [[1.0], [2.0]]
    assert log_alpha.item() == LOG_ALPHA  # a fixed temperature stays fixed
    assert loss.shape == () and entropy.shape == ()
    # α log π − min Q balances at σ² = α / (2 c) with c = 2, the larger curvature: log σ ≈ −1.5
    assert abs(actor.log_std.item() - 0.5 * math.log(0.05 / 4)) < 0.2


def test_a_tuned_temperature_falls_while_the_entropy_is_above_its_target():
    *_, log_alpha, _, entropy = _train(20, tuned=True, target_entropy=-5.0)
    assert entropy.item() > -5.0 and log_alpha.item() < LOG_ALPHA


def test_a_tuned_temperature_rises_while_the_entropy_is_below_its_target():
    *_, log_alpha, _, entropy = _train(20, tuned=True, target_entropy=5.0)
    assert entropy.item() < 5.0 and log_alpha.item() > LOG_ALPHA
