"""A seed batch's network (`nets/seeded.py`: the nets/ class itself, its layers stacked) computes
each seed's own policy, and seeds never touch each other."""

from __future__ import annotations

import pytest
import torch

from rltrain.errors import UserError
from rltrain.nets import seeded
from rltrain.nets.heads import GaussianHead
from rltrain.nets.seeded import check_stackable, stack_modules
from tests.seed_batch.helpers import ppo_members


@pytest.mark.orders
@pytest.mark.parametrize("env_id,extra", [("CartPole-v1", ()), ("Pendulum-v1", ()),
                                          ("CartPole-v1", ("net.layer_norm=true",))])
def test_forward_is_each_seeds_own_policy(env_id, extra):
    _assert_each_seeds_own_policy(*ppo_members(env_id, 3, *extra), rtol=1e-5)


def _assert_each_seeds_own_policy(members, streams, spec, rtol: float) -> None:
    """One forward, stacked and per seed: each output sums at most 64 products per layer in
    another order, so the two differ by at most 64 u ≈ 4e-6 of the sum of the terms' sizes
    (O(1) here; measured: 2.4e-7 under the four kernel settings of `make test-float`)."""
    net = stack_modules([m.policy for m in members])
    obs = torch.randn(3, 5, *spec.obs_shape)
    dist, value = net.dist_value(obs)
    for k, m in enumerate(members):
        own, own_value = m.policy.dist_value(obs[k])
        torch.testing.assert_close(value[k], own_value, rtol=rtol, atol=1e-5)
        if isinstance(net.head, GaussianHead):
            torch.testing.assert_close(dist.mean[k], own.mean, rtol=rtol, atol=1e-5)
            torch.testing.assert_close(dist.log_std[k], own.log_std, rtol=0, atol=0)
        else:
            torch.testing.assert_close(dist.log_probs[k], own.log_probs, rtol=rtol, atol=1e-5)


@pytest.mark.orders
def test_large_batches_take_the_fast_tanh_and_still_match_each_seed(monkeypatch):
    """A stacked tanh layer goes through `nets.activations.tanh`: from FAST_TANH_NUMEL elements
    on (here every call) 2 sigmoid(2x) - 1, and the stacked forward through it is still each
    seed's own policy (the values themselves: tests/nets/test_activations.py)."""
    import rltrain.nets.activations as activations

    real, calls = activations._FastTanh.apply, []

    def counting(t: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(t.shape))
        return real(t)

    monkeypatch.setattr(activations, "FAST_TANH_NUMEL", 1)
    monkeypatch.setattr(activations._FastTanh, "apply", counting)
    _assert_each_seeds_own_policy(*ppo_members("CartPole-v1", 3), rtol=1e-5)
    stacked_calls = [shape for shape in calls if len(shape) == 3 and shape[0] == 3]
    assert len(stacked_calls) == 4  # the actor's and the critic's two hidden tanh layers


def test_seeds_are_isolated():
    """Changing seed 1's weights changes only seed 1's outputs; seed 0's loss moves only seed
    0's gradients."""
    members, _, spec = ppo_members("CartPole-v1", 3)
    net = stack_modules([m.policy for m in members])
    obs = torch.randn(3, 7, *spec.obs_shape)
    before_dist, before_value = net.dist_value(obs)
    with torch.no_grad():
        for p in net.parameters():
            p[1].add_(torch.randn_like(p[1]))
    after_dist, after_value = net.dist_value(obs)
    for k in (0, 2):
        assert torch.equal(after_value[k], before_value[k])
        assert torch.equal(after_dist.log_probs[k], before_dist.log_probs[k])
    assert not torch.equal(after_value[1], before_value[1])
    dist, value = net.dist_value(obs)
    (dist.log_probs[0].sum() + value[0].sum()).backward()
    for p in net.parameters():
        assert p.grad[0].abs().sum() > 0
        assert torch.count_nonzero(p.grad[1:]) == 0


def test_heads_keep_their_weights_out_by_in_and_every_gradient_arrives_in_place():
    """A layer with fewer outputs than inputs (the 2 logits, the value) keeps its stacked
    weight `[S, out, in]` contiguous and is computed as `W xᵀ`; wider layers are laid out as
    `[S, in, out]` (`stack_seeds`). Either way each gradient arrives in its parameter's own
    layout, so the fused Adam steps it without a copy."""
    members, _, spec = ppo_members("CartPole-v1", 3)
    net = stack_modules([m.policy for m in members])
    logits, value, hidden = (dict(net.named_parameters())[n] for n in ("head.logits.weight", "critic.4.weight",
                                                      "actor_body.2.weight"))
    assert logits.shape == (3, 2, 16) and value.shape == (3, 1, 16) and hidden.shape == (3, 16, 16)
    assert logits.is_contiguous() and value.is_contiguous()
    assert hidden.transpose(1, 2).is_contiguous() and not hidden.is_contiguous()
    dist, values = net.dist_value(torch.randn(3, 9, *spec.obs_shape))
    (dist.log_probs.sum() + values.square().sum()).backward()
    for name, p in net.named_parameters():
        assert p.grad.stride() == p.stride(), name


def test_copy_round_trip():
    members, _, _ = ppo_members("Pendulum-v1", 2)
    net = stack_modules([m.policy for m in members])
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(2.0)
    seeded.copy_to(net, 1, members[1].policy)
    for name, p in members[1].policy.named_parameters():
        assert torch.equal(p, dict(net.named_parameters())[name][1])
    with torch.no_grad():
        for p in members[0].policy.parameters():
            p.zero_()
    seeded.copy_from(net, 0, members[0].policy)
    assert all(torch.count_nonzero(p[0]) == 0 for p in net.parameters())


@pytest.mark.parametrize("extra,fragment", [
    (("algo.recurrent=lstm",), "recurrent"),
    (("net.share_encoder=true",), "share_encoder"),
    (("algo.use_sde=true",), "gSDE"),
])
def test_what_cannot_be_stacked_is_one_line(extra, fragment):
    env_id = "Pendulum-v1" if "algo.use_sde=true" in extra else "CartPole-v1"
    members, _, _ = ppo_members(env_id, 1, *extra)
    with pytest.raises(UserError, match=fragment):
        check_stackable(members[0].policy)


IN_TURN = {"trpo": "its conjugate gradient and line search are per seed",
           "crossq": "BatchRenorm layers do not stack",
           "ars": "each row acts with its own candidate's weights and each seed's generation "
                  "is scored and stepped alone (no gradients for a stacked step to batch)"}
"""Built-in algorithms whose seed batches run each seed's own algorithm in turn, and why."""


def test_every_builtin_algorithm_has_a_stacked_form_but_those_that_run_in_turn():
    from rltrain.config.catalog import ALGORITHMS

    for name, entry in ALGORITHMS.items():
        assert callable(entry.stack()) != (name in IN_TURN), name
