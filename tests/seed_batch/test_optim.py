"""A seed batch's Adam (`FusedAdam(seeds=S)`) and gradient clipping agree with torch's, seed by
seed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rltrain.algos.optim import FusedAdam
from rltrain.algos.seed_optim import clip_grad_norm_per_seed, stacked_optimizer
from rltrain.nets.seeded import stack_seeds

# Each test steps the batch's optimizer and each seed's own on the same gradients: no loss
# feeds a difference back, so the two orders stay within a few ulps of each step.
pytestmark = pytest.mark.orders


def _nets(seeds: int) -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)) for _ in range(seeds)]


def _stacked(nets: list[nn.Module], transposed: bool = False) -> list[torch.Tensor]:
    """The stacked parameters; `transposed`: matrices laid out as `nets/seeded.py` lays out Linear
    weights (`[S, out, in]` with the strides of `[S, in, out]`)."""
    return [stack_seeds([p.detach() for p in ps], transposed and ps[0].dim() == 2)
            .requires_grad_() for ps in zip(*(n.parameters() for n in nets), strict=True)]


def _step_once(stacked: list[torch.Tensor], seed_adam: FusedAdam, nets: list[nn.Module],
               opts: list, active: list[bool], grads: list[torch.Tensor],
               like_param: bool = True) -> None:
    """One step of the batch's Adam on `grads` and of each active seed's own optimizer on its
    slice of them; `like_param`: the stacked gradients get their parameter's strides
    (autograd's layout), else contiguous ones."""
    for p, g in zip(stacked, grads, strict=True):
        p.grad = torch.empty_like(p).copy_(g) if like_param else g.clone()
    seed_adam.step(active)
    for k, (net, opt) in enumerate(zip(nets, opts, strict=True)):
        if active[k]:
            for p, g in zip(net.parameters(), grads, strict=True):
                p.grad = g[k].contiguous().clone()
            opt.step()


def test_clip_per_seed_is_clip_grad_norm_per_seed():
    nets = _nets(3)
    stacked = _stacked(nets)
    grads = [torch.randn_like(p) * (1 + 10 * torch.arange(3.0).view(-1, *[1] * (p.dim() - 1)))
             for p in stacked]
    for p, g in zip(stacked, grads, strict=True):
        p.grad = g.clone()
    norms = clip_grad_norm_per_seed(stacked, 1.0)
    for k, net in enumerate(nets):
        for p, g in zip(net.parameters(), grads, strict=True):
            p.grad = g[k].contiguous().clone()  # the single run's own layout
        expected = nn.utils.clip_grad_norm_(list(net.parameters()), 1.0)
        torch.testing.assert_close(norms[k], expected, rtol=1e-6, atol=0)
        for p, s in zip(net.parameters(), stacked, strict=True):
            torch.testing.assert_close(s.grad[k], p.grad, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("transposed", [False, True])
def test_adam_matches_torch_adam_per_seed_and_a_frozen_seed_stays_put(transposed):
    """Five steps; seed 1 sits out steps 2 and 3 (a KL stop): its weights, moments and step
    count stay, and it then goes on as a torch Adam that took only the steps it took."""
    nets = _nets(3)
    opts = [torch.optim.Adam(n.parameters(), lr=1e-2, eps=1e-5) for n in nets]
    stacked = _stacked(nets, transposed)
    seed_adam = stacked_optimizer(stacked, opts)
    gen = torch.Generator().manual_seed(1)
    for step in range(5):
        active = [True, step not in (2, 3), True]
        grads = [torch.randn(p.shape, generator=gen) for p in stacked]
        for p, g in zip(stacked, grads, strict=True):
            p.grad = g.clone()
        seed_adam.step(active)
        for k, (net, opt) in enumerate(zip(nets, opts, strict=True)):
            if not active[k]:
                continue
            for p, g in zip(net.parameters(), grads, strict=True):
                p.grad = g[k].contiguous().clone()  # the single run's own layout
            opt.step()
    for k, net in enumerate(nets):
        for p, s in zip(net.parameters(), stacked, strict=True):
            torch.testing.assert_close(s[k], p.detach(), rtol=1e-5, atol=1e-6)
    assert seed_adam.steps.tolist() == [5.0, 3.0, 5.0]


@pytest.mark.parametrize("transposed", [False, True])
def test_a_seed_left_behind_by_a_kl_stop_steps_as_its_fused_adam_bit_for_bit(transposed):
    """After a KL stop the seeds' step counts differ for the rest of the run: each active seed
    then takes the fused kernel on its own slices with its own step count, which is its single
    run's `FusedAdam` step exactly (the foreach arithmetic was not: 1e-9 apart here on the CPU,
    up to 1e-7 on an H200). A network of the widths rltrain uses: tensors of a few elements
    (`_nets`) can still round apart in the CPU kernel's last bit."""
    torch.manual_seed(0)
    nets = [nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2)) for _ in range(3)]
    opts = [FusedAdam(list(n.parameters()), lr=3e-4, eps=1e-5) for n in nets]
    stacked = _stacked(nets, transposed)
    seed_adam = stacked_optimizer(stacked, opts)
    gen = torch.Generator().manual_seed(1)
    for step in range(6):
        active = [True, step not in (2, 3), step != 4]
        _step_once(stacked, seed_adam, nets, opts, active,
                   [torch.randn(p.shape, generator=gen) for p in stacked])
        for k, net in enumerate(nets):
            for p, s in zip(net.parameters(), stacked, strict=True):
                assert torch.equal(s[k].detach(), p.detach()), (step, k)
    assert seed_adam.steps.tolist() == [6.0, 4.0, 5.0]


def test_state_copies_to_and_from_torch_adam():
    nets = _nets(2)
    opts = [torch.optim.Adam(n.parameters(), lr=1e-3) for n in nets]
    stacked = _stacked(nets)
    seed_adam = stacked_optimizer(stacked, opts)
    for p in stacked:
        p.grad = torch.ones_like(p)
    seed_adam.step([True, True])
    seed_adam.copy_to(1, opts[1])
    state = opts[1].state_dict()["state"]
    assert float(state[0]["step"]) == 1.0
    torch.testing.assert_close(state[0]["exp_avg"], seed_adam.state[stacked[0]]["exp_avg"][1])
    again = [p.detach().clone().requires_grad_() for p in stacked]
    fresh = stacked_optimizer(again, opts)
    assert fresh.steps.tolist() == [0.0, 1.0]  # seed 0's optimizer never stepped
    torch.testing.assert_close(fresh.state[again[0]]["exp_avg_sq"][1],
                               seed_adam.state[stacked[0]]["exp_avg_sq"][1])


def test_seeds_in_step_take_torchs_fused_kernel_bit_for_bit():
    """All seeds active at one step count (off-policy batches, PPO without a KL stop): the
    stacked step is torch's fused Adam, so each seed equals its fused single-run Adam exactly."""
    nets = _nets(3)
    opts = [torch.optim.Adam(n.parameters(), lr=3e-3, eps=1e-5, fused=True) for n in nets]
    stacked = _stacked(nets)
    seed_adam = stacked_optimizer(stacked, opts)
    _step_both(stacked, seed_adam, nets, opts, steps=4)
    for k, net in enumerate(nets):
        for p, s in zip(net.parameters(), stacked, strict=True):
            assert torch.equal(s[k].detach(), p.detach())
    assert seed_adam.steps.tolist() == [4.0, 4.0, 4.0]


@pytest.mark.parametrize("grad_layout", ["autograd", "contiguous"])
def test_transposed_weights_reach_the_fused_kernel_without_a_copy(monkeypatch, grad_layout):
    """A seed batch's Linear weights are strided (`stack_seeds`): with gradients in their layout
    (what autograd gives) the fused kernel gets contiguous views of the same memory, so it has
    nothing to copy; a gradient of another layout takes the foreach path. Same values either way
    (not bit for bit: the kernel's vector lanes see the elements in another order)."""
    calls = []
    fused = torch._fused_adam_

    def spy(params, grads, *args, **kwargs):
        calls.append(all(t.is_contiguous() for t in [*params, *grads, *args[0], *args[1]]))
        return fused(params, grads, *args, **kwargs)

    monkeypatch.setattr(torch, "_fused_adam_", spy)
    nets = _nets(3)  # the references step unfused, so every spied call is the batch's
    opts = [torch.optim.Adam(n.parameters(), lr=3e-3, eps=1e-5, foreach=False) for n in nets]
    stacked = _stacked(nets, transposed=True)
    strides = [p.stride() for p in stacked]
    assert strides[0] == (15, 1, 5)  # [S, 5, 3] laid out as [S, 3, 5]
    seed_adam = stacked_optimizer(stacked, opts)
    _step_both(stacked, seed_adam, nets, opts, steps=4, like_param=grad_layout == "autograd")
    for k, net in enumerate(nets):
        for p, s in zip(net.parameters(), stacked, strict=True):
            torch.testing.assert_close(s[k].detach(), p.detach(), rtol=1e-6, atol=1e-7)
    assert calls == ([True] * 4 if grad_layout == "autograd" else [])
    assert [p.stride() for p in stacked] == strides


def _step_both(stacked, seed_adam, nets, opts, steps: int, like_param: bool = True) -> None:
    """`steps` Adam steps on random gradients, stacked and per seed; `like_param`: the stacked
    gradients get their parameter's strides, else contiguous ones."""
    gen = torch.Generator().manual_seed(2)
    for _ in range(steps):
        _step_once(stacked, seed_adam, nets, opts, [True] * len(nets),
                   [torch.randn(p.shape, generator=gen) for p in stacked], like_param)
