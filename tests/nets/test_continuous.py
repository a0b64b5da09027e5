"""Continuous-control networks: tanh log-prob correction, action bounds, batched twin critics."""

import math

import pytest
import torch
from torch.distributions import Normal

from rltrain.nets.continuous import (
    DeterministicActor,
    EnsembleLayerNorm,
    EnsembleLinear,
    QEnsemble,
    SquashedGaussianActor,
    TwinQ,
    add_gaussian_noise,
    ensemble_linear,
    squashed_gaussian_log_prob,
    tanh_log_det_jacobian,
)
from rltrain.nets.spec import NetSpec


def flat(obs_dim: int, hidden: list[int]) -> NetSpec:
    """Settings of a ReLU MLP on vector observations of size `obs_dim`."""
    return NetSpec((obs_dim,), tuple(hidden))


def test_squashed_log_prob_matches_float64_change_of_variables():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(64, 3, generator=g)
    log_std = torch.rand(64, 3, generator=g) * 2 - 1.5
    u = mean + log_std.exp() * torch.randn(64, 3, generator=g)
    u64, mean64, std64 = u.double(), mean.double(), log_std.double().exp()
    direct = (Normal(mean64, std64).log_prob(u64) - torch.log(1 - torch.tanh(u64) ** 2)).sum(-1)
    got = squashed_gaussian_log_prob(u, mean, log_std)
    torch.testing.assert_close(got.double(), direct, rtol=1e-5, atol=1e-4)


def test_squashed_log_prob_matches_finite_difference_jacobian():
    u = torch.linspace(-4.0, 4.0, 41, dtype=torch.float64).unsqueeze(-1)
    mean, log_std = torch.full_like(u, 0.3), torch.full_like(u, -0.2)
    h = 1e-6
    dtanh = (torch.tanh(u + h) - torch.tanh(u - h)) / (2 * h)
    expected = (Normal(mean, log_std.exp()).log_prob(u) - dtanh.log()).squeeze(-1)
    torch.testing.assert_close(squashed_gaussian_log_prob(u, mean, log_std), expected,
                               rtol=1e-6, atol=1e-6)


def test_squashed_density_integrates_to_one_over_the_unit_interval():
    a = torch.linspace(-1 + 1e-9, 1 - 1e-9, 400_001, dtype=torch.float64).unsqueeze(-1)
    u = torch.atanh(a)
    density = squashed_gaussian_log_prob(u, torch.full_like(u, 0.5),
                                         torch.full_like(u, -0.5)).exp()
    assert torch.trapezoid(density, a.squeeze(-1)).item() == pytest.approx(1.0, abs=1e-4)


def test_tanh_log_det_jacobian_stays_finite_where_the_naive_form_is_minus_inf():
    u = torch.tensor([-30.0, 30.0])
    assert torch.isinf(torch.log(1 - torch.tanh(u) ** 2)).all()  # the naive formula fails here
    expected = 2 * (math.log(2.0) - 30.0)  # log sech²(u) ≈ 2 (log 2 − |u|) for large |u|
    torch.testing.assert_close(tanh_log_det_jacobian(u), torch.full((2,), expected))


def test_sb3s_epsilon_form_flattens_where_tanh_saturates_and_the_exact_form_keeps_pulling():
    """`algo.squash_eps=1e-6`: log(1 − tanh² + 1e-6), SB3's. At u = 0 it is log(1 + 1e-6);
    saturated (|u| = 10) it is log(1e-6) with no gradient left, where the exact form's slope
    is −2 sign(u) (the entropy term pulls the action back from the bound)."""
    u = torch.tensor([0.0, 10.0, -10.0], requires_grad=True)
    eps_form = tanh_log_det_jacobian(u, 1e-6)
    torch.testing.assert_close(eps_form.detach(), torch.tensor(
        [math.log(1 + 1e-6), math.log(1e-6), math.log(1e-6)]), rtol=1e-5, atol=1e-5)
    (grad_eps,) = torch.autograd.grad(eps_form.sum(), u)
    (grad_exact,) = torch.autograd.grad(tanh_log_det_jacobian(u).sum(), u)
    torch.testing.assert_close(grad_eps, torch.zeros(3), rtol=0, atol=1e-3)
    torch.testing.assert_close(grad_exact, torch.tensor([0.0, -2.0, 2.0]))
    small = torch.tensor([0.3, -1.2])  # unsaturated: the two forms agree to ~1e-6
    torch.testing.assert_close(tanh_log_det_jacobian(small, 1e-6), tanh_log_det_jacobian(small),
                               rtol=0, atol=1e-5)
    actor = SquashedGaussianActor(flat(4, [16]), 2, squash_eps=1e-6)
    mean, log_std = actor.dist_params(torch.zeros(1, 4))
    _, log_prob = actor(torch.zeros(1, 4), deterministic=True)
    torch.testing.assert_close(log_prob, squashed_gaussian_log_prob(mean, mean, log_std, 1e-6))


@pytest.mark.parametrize("deterministic", [True, False])
def test_actor_actions_stay_within_unit_box_for_extreme_observations(deterministic):
    torch.manual_seed(0)
    obs = torch.randn(256, 4) * 1e3
    squashed = SquashedGaussianActor(flat(4, [16, 16]), 2)
    action, log_prob = squashed(obs, deterministic=deterministic)
    assert action.abs().max() <= 1.0 and torch.isfinite(log_prob).all()
    assert DeterministicActor(flat(4, [16, 16]), 2).act(obs, deterministic).abs().max() <= 1.0


def test_squashed_actor_deterministic_action_is_tanh_of_mean():
    torch.manual_seed(0)
    actor, obs = SquashedGaussianActor(flat(3, [16]), 2), torch.randn(8, 3)
    mean, _ = actor.dist_params(obs)
    torch.testing.assert_close(actor.act(obs, deterministic=True), torch.tanh(mean))
    assert not torch.equal(actor.act(obs, deterministic=False), torch.tanh(mean))


def test_acting_samples_the_action_the_training_pass_samples_from_the_same_draws():
    """`act` skips the log-probability but not the sample: from the same ε it returns exactly
    the action `forward` (the update's pass) returns, σ and all."""
    torch.manual_seed(0)
    actor, obs = SquashedGaussianActor(flat(3, [16]), 2), torch.randn(8, 3)
    noise = torch.randn(8, 2)
    assert torch.equal(actor.act(obs, False, noise), actor(obs, noise=noise)[0])
    mean, log_std = actor.dist_params(obs)
    torch.testing.assert_close(actor.act(obs, False, noise),
                               torch.tanh(mean + log_std.exp() * noise))

def test_squashed_actor_log_std_is_clamped_to_its_bounds():
    actor = SquashedGaussianActor(flat(3, [16]), 1, log_std_min=-2.0, log_std_max=0.5)
    torch.nn.init.constant_(actor.log_std.bias, 100.0)
    assert torch.equal(actor.dist_params(torch.randn(4, 3))[1], torch.full((4, 1), 0.5))


def test_add_gaussian_noise_clips_back_to_unit_box():
    torch.manual_seed(0)
    action = torch.full((1000, 2), 0.9)
    noisy = add_gaussian_noise(action, std=5.0)
    assert noisy.abs().max() == 1.0 and (noisy != action).all()
    assert torch.equal(add_gaussian_noise(action, std=0.0), action)


def test_twin_q_matches_two_independent_critics():
    torch.manual_seed(0)
    q = TwinQ(flat(3, [16, 8]), 2)
    obs, act = torch.randn(5, 3), torch.randn(5, 2)
    x = torch.cat([obs, act], -1)
    for i in range(2):
        h = x
        for layer in q.net:
            h = h @ layer.weight[i] + layer.bias[i] if hasattr(layer, "weight") else layer(h)
        torch.testing.assert_close(q(obs, act)[i], h.squeeze(-1))
    assert q(obs, act).shape == (2, 5) and not torch.allclose(q(obs, act)[0], q(obs, act)[1])


def test_q_ensemble_gradients_do_not_leak_between_members():
    q = QEnsemble(flat(3, [16]), 1, n=3)
    q(torch.randn(4, 3), torch.randn(4, 1))[1].sum().backward()
    grad = q.net[0].weight.grad
    assert grad[1].abs().sum() > 0 and grad[0].abs().sum() == 0 and grad[2].abs().sum() == 0


def test_ensemble_layer_norm_normalizes_each_member_with_its_own_scale():
    torch.manual_seed(0)
    norm = EnsembleLayerNorm(3, 4)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
        norm.bias.normal_()
    x = torch.randn(3, 5, 4) * 10 + 3
    for i in range(3):
        expected = torch.nn.functional.layer_norm(x[i], (4,), norm.weight[i, 0], norm.bias[i, 0])
        torch.testing.assert_close(norm(x)[i], expected)


def test_ensemble_linear_ortho_init_is_orthogonal_per_member():
    layer = EnsembleLinear(2, 8, 8, ortho_gain=2.0)
    for i in range(2):
        w = layer.weight[i]
        torch.testing.assert_close(w.T @ w, 4.0 * torch.eye(8), atol=1e-5, rtol=0)
    assert not torch.equal(layer.weight[0], layer.weight[1]) and (layer.bias == 0).all()


def test_twin_q_layer_norm_keeps_members_independent():
    q = TwinQ(NetSpec((3,), (16,), layer_norm=True), 1)
    assert isinstance(q.net[1], EnsembleLayerNorm)
    q(torch.randn(4, 3), torch.randn(4, 1))[0].sum().backward()
    assert q.net[1].weight.grad[1].abs().sum() == 0 and q.net[1].weight.grad[0].abs().sum() > 0


@pytest.mark.parametrize("out_dim", [1, 3])
def test_ensemble_linear_matches_the_batched_product_forward_and_backward(out_dim):
    """`ensemble_linear` (a dot product per row for one output, `baddbmm` otherwise) is each
    member's `x @ W + b`, with the same gradients for x, W and b."""
    torch.manual_seed(0)
    x = torch.randn(2, 7, 5, requires_grad=True)
    weight = torch.randn(2, 5, out_dim, requires_grad=True)
    bias = torch.randn(2, 1, out_dim, requires_grad=True)
    grad = torch.randn(2, 7, out_dim)
    ours = ensemble_linear(x, weight, bias)
    assert ours.shape == (2, 7, out_dim)
    ours_grads = torch.autograd.grad(ours, (x, weight, bias), grad)
    reference = torch.baddbmm(bias, x, weight)
    reference_grads = torch.autograd.grad(reference, (x, weight, bias), grad)
    torch.testing.assert_close(ours, reference)
    for mine, theirs in zip(ours_grads, reference_grads, strict=True):
        torch.testing.assert_close(mine, theirs)
        assert mine.stride() == theirs.stride() or mine.is_contiguous()
