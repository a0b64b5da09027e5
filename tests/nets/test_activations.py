"""The hidden-layer tanh: `torch.tanh` for small tensors and graph capture, `2 sigmoid(2x) - 1`
(tanh's own backward) for large CPU ones, within float32 rounding of `torch.tanh` either way."""

from __future__ import annotations

import torch
from torch import nn

import rltrain.nets.activations as activations
from rltrain.nets.mlp import mlp


def test_fast_form_matches_tanh_values_and_gradients():
    x = torch.linspace(-12, 12, 200_001, dtype=torch.float32, requires_grad=True)
    ref = x.detach().clone().requires_grad_(True)
    y = activations.tanh(x)
    assert y.grad_fn is not None and "FastTanh" in type(y.grad_fn).__name__
    torch.testing.assert_close(y, torch.tanh(ref), rtol=0, atol=3e-7)
    assert y.abs().max().item() <= 1.0
    y.square().sum().backward()
    torch.tanh(ref).square().sum().backward()
    torch.testing.assert_close(x.grad, ref.grad, rtol=0, atol=1e-6)
    with torch.no_grad():  # no gradient wanted: the same form, without the autograd function
        torch.testing.assert_close(activations.tanh(ref), torch.tanh(ref), rtol=0, atol=3e-7)


def test_small_tensors_take_torch_tanh_bit_for_bit():
    x = torch.randn(activations.FAST_TANH_NUMEL - 1, requires_grad=True)
    y = activations.tanh(x)
    assert "Tanh" in type(y.grad_fn).__name__ and "Fast" not in type(y.grad_fn).__name__
    assert torch.equal(y, torch.tanh(x))


def test_mlp_hidden_tanh_takes_the_fast_form_on_large_batches(monkeypatch):
    net = mlp(4, [64, 64], 2, act="tanh")
    tanhs = [m for m in net if isinstance(m, nn.Tanh)]
    assert len(tanhs) == 2 and all(isinstance(m, activations.Tanh) for m in tanhs)
    calls = []
    real = activations._FastTanh.apply
    monkeypatch.setattr(activations._FastTanh, "apply", lambda t: calls.append(t.shape) or real(t))
    net(torch.randn(8, 4)).sum().backward()  # 512 elements: torch.tanh
    assert calls == []
    net(torch.randn(1024, 4)).sum().backward()  # 65,536 elements per layer
    assert calls == [torch.Size([1024, 64])] * 2


def test_traced_graphs_keep_torch_tanh():
    """A traced (and so exported) network records aten::tanh, whatever the example's size."""
    net = mlp(4, [64], 2, act="tanh")
    example = torch.randn(1024, 4)
    traced = torch.jit.trace(net, example)
    graph = str(traced.inlined_graph)
    assert "aten::tanh" in graph and "sigmoid" not in graph
    torch.testing.assert_close(traced(example), net(example), rtol=0, atol=1e-6)
