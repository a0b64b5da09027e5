"""A critic head with several outputs per action and a loss the algorithm chooses: a toy
quantile critic (QR-style, as TQC's) trained through `critic_objective` on a synthetic batch."""

from __future__ import annotations

import torch

from rltrain.algos.off_policy_steps import critic_objective, mse_losses
from rltrain.algos.optim import adam
from rltrain.algos.steps import EagerSteps, Trained
from rltrain.nets.continuous import QEnsemble
from rltrain.nets.seeded import stack_modules
from rltrain.nets.spec import NetSpec
from rltrain.types import TransitionBatch

SPEC = NetSpec(obs_shape=(3,), hidden=(32, 32))
QUANTILES = 8


def quantile_huber_losses(q: torch.Tensor, y: torch.Tensor, kappa: float = 1.0) -> torch.Tensor:
    """Each critic's quantile Huber loss (Dabney et al. 2018): quantiles `q` `[E, B, M]` at
    τ_i = (i + ½) / M against target samples `y` `[B, K]`; `[E]`."""
    taus = (torch.arange(q.shape[-1]) + 0.5) / q.shape[-1]
    u = y.unsqueeze(-3).unsqueeze(-2) - q.unsqueeze(-1)  # [E, B, M, K]
    huber = torch.where(u.abs() <= kappa, 0.5 * u.pow(2), kappa * (u.abs() - 0.5 * kappa))
    weight = (taus.unsqueeze(-1) - (u < 0).float()).abs()
    return (weight * huber / kappa).sum(-2).mean((-2, -1))


def synthetic_batch(g: torch.Generator, rows: int = 64, samples: int = 16,
                    ) -> tuple[TransitionBatch, torch.Tensor]:
    """Transitions whose return is s₀ + a + N(0, 1): the batch and `samples` draws per row."""
    obs, actions = torch.randn(rows, 3, generator=g), torch.rand(rows, 1, generator=g) * 2 - 1
    zeros = torch.zeros(rows)
    y = (obs[:, :1] + actions) + torch.randn(rows, samples, generator=g)
    return TransitionBatch(obs, actions, zeros, obs, zeros), y


def test_one_output_per_action_keeps_the_ensembles_shape():
    torch.manual_seed(0)
    assert QEnsemble(SPEC, 1, n=2)(torch.randn(5, 3), torch.randn(5, 1)).shape == (2, 5)
    head = QEnsemble(SPEC, 1, n=2, outputs=QUANTILES)
    assert head(torch.randn(5, 3), torch.randn(5, 1)).shape == (2, 5, QUANTILES)


def test_a_quantile_critic_learns_its_return_distribution_through_critic_objective():
    torch.manual_seed(0)
    critic = QEnsemble(SPEC, 1, n=2, outputs=QUANTILES)
    optimizer, g = adam(critic.parameters(), 3e-3), torch.Generator().manual_seed(1)
    steps = EagerSteps({"critic": Trained(critic, optimizer)}, {})

    def step(batch: TransitionBatch, y: torch.Tensor) -> torch.Tensor:
        return steps.minimize(("critic",), lambda net: critic_objective(
            net, batch, y, quantile_huber_losses))[0]
    losses = [step(*synthetic_batch(g)) for _ in range(300)]
    assert losses[0].shape == (2,)
    first, last = torch.stack(losses[:10]).mean(0), torch.stack(losses[-10:]).mean(0)
    assert (last < 0.5 * first).all(), (first, last)
    batch, _ = synthetic_batch(g)
    q = critic(batch.obs, batch.actions).detach()  # [2, B, M]
    # N(0, 1)'s quantiles at τ = 1/16 and 15/16 are ∓1.53: the outer ones learned apart, in order
    spread = (q[..., -1] - q[..., 0]).mean().item()
    assert 2.0 < spread < 4.0, spread
    assert (q.diff(dim=-1).mean((0, 1)) > 0).all()
    # their middle follows the return's mean s₀ + a
    middle = q[..., QUANTILES // 2 - 1: QUANTILES // 2 + 1].mean(-1)
    assert (middle - (batch.obs[:, 0] + batch.actions[:, 0])).abs().mean() < 0.3


def test_the_default_loss_is_each_critics_mean_squared_error():
    q, y = torch.tensor([[1.0, 2.0], [0.0, 4.0]]), torch.tensor([1.0, 0.0])
    assert mse_losses(q, y).tolist() == [(0 + 4) / 2, (1 + 16) / 2]


def test_a_seed_batch_runs_each_seeds_quantile_head():
    critics = []
    for seed in range(2):
        torch.manual_seed(seed)
        critics.append(QEnsemble(SPEC, 1, n=2, outputs=QUANTILES))
    obs, action = torch.randn(2, 5, 3), torch.randn(2, 5, 1)
    stacked = stack_modules(critics)(obs, action)
    assert stacked.shape == (2, 2, 5, QUANTILES)
    for k, critic in enumerate(critics):
        torch.testing.assert_close(stacked[k], critic(obs[k], action[k]), rtol=1e-5, atol=1e-6)
