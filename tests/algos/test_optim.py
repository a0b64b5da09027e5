"""The lean Adam step and gradient clip (`rltrain/algos/optim.py`) give torch's results bit for
bit, keep torch's state format, and hand anything they do not cover back to torch."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rltrain.algos.optim import LazyAdam, _fused_adam_lists, adam, clip_grad_norm
from rltrain.registry import ALGOS
from rltrain.types import EnvSpec, RolloutBatch, TransitionBatch


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def train(model: nn.Module, opt, steps: int, clip: float | None = None) -> list[float]:
    """`steps` updates on fixed random data, changing the lr as DQN's decay does; the norms."""
    gen = torch.Generator().manual_seed(1)
    norms = []
    for i in range(steps):
        x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 3, generator=gen)
        opt.param_groups[0]["lr"] = 1e-2 * (1 - i / (2 * steps))
        opt.zero_grad(set_to_none=True)
        ((model(x) - y) ** 2).mean().mul(50.0).backward()
        if clip is not None:
            norms.append(float(clip_grad_norm(list(model.parameters()), clip)
                               if isinstance(opt, LazyAdam)
                               else nn.utils.clip_grad_norm_(model.parameters(), clip,
                                                             foreach=True)))
        opt.step()
    return norms


def fused_adam(model: nn.Module) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=1e-2, eps=1e-8, fused=True)


@pytest.mark.parametrize("clip", [None, 0.5, 1e6])
def test_lean_step_and_clip_equal_torchs_bit_for_bit(clip):
    ours, theirs = net(), net()
    lean, reference = adam(ours.parameters(), 1e-2), fused_adam(theirs)
    assert train(ours, lean, 25, clip) == train(theirs, reference, 25, clip)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    mine, its = lean.state_dict(), reference.state_dict()
    assert mine["param_groups"] == its["param_groups"]
    for k, state in its["state"].items():
        assert set(mine["state"][k]) == set(state)
        assert all(torch.equal(mine["state"][k][n], t) for n, t in state.items())
    if clip == 0.5:  # the clip did clip: the test compares clipped steps
        assert max(train(net(), fused_adam(net()), 3, clip)) > 0.5


def test_the_lean_path_runs_after_the_first_step_and_state_moves_both_ways():
    model = net()
    lean = adam(model.parameters(), 1e-2)
    model(torch.ones(1, 4)).sum().backward()
    assert _fused_adam_lists(lean.built) is None  # no state yet: torch's step makes it
    lean.step()
    lists = _fused_adam_lists(lean.built)
    assert lists is not None and len(lists[0]) == 4
    assert float(lists[4][0]) == 1.0
    lean.step()
    assert float(lean.state_dict()["state"][0]["step"]) == 2.0  # the lean step counted
    # a torch Adam continues from the lean one's state, and the other way round
    other = fused_adam(copy.deepcopy(model))
    other.load_state_dict(lean.state_dict())
    back = adam(model.parameters(), 1e-2)
    back.load_state_dict(other.state_dict())
    assert float(back.state_dict()["state"][0]["step"]) == 2.0


def test_zero_grad_drops_every_gradient_or_zeroes_them_when_asked():
    model = net()
    lean = adam(model.parameters(), 1e-2)
    model(torch.ones(1, 4)).sum().backward()
    lean.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    lean.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_hooks_amsgrad_and_frozen_parameters_take_torchs_own_step():
    model = net()
    lean = adam(model.parameters(), 1e-2)
    model(torch.ones(1, 4)).sum().backward()
    lean.step()
    calls = []
    handle = lean.built.register_step_pre_hook(lambda *_: calls.append(1))
    assert _fused_adam_lists(lean.built) is None
    lean.step()
    assert calls == [1]  # torch's step ran the hook
    handle.remove()
    assert _fused_adam_lists(lean.built) is not None
    lean.built.param_groups[0]["amsgrad"] = True
    assert _fused_adam_lists(lean.built) is None
    lean.built.param_groups[0]["amsgrad"] = False
    # a parameter without a gradient is skipped, as torch skips it
    before = model[2].bias.detach().clone()
    model[2].bias.grad = None
    assert len(_fused_adam_lists(lean.built)[0]) == 3
    lean.step()
    assert torch.equal(model[2].bias, before)


def test_unfused_adam_steps_as_torch_does():
    model = net()
    plain = LazyAdam(lambda: torch.optim.Adam(model.parameters(), lr=1e-2))  # not fused
    model(torch.ones(1, 4)).sum().backward()
    plain.step()
    assert _fused_adam_lists(plain.built) is None
    before = [p.detach().clone() for p in model.parameters()]
    plain.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_clip_of_mixed_dtypes_and_no_gradients_falls_back_to_torch():
    a = nn.Parameter(torch.ones(3))
    b = nn.Parameter(torch.ones(2, dtype=torch.float64))
    a.grad, b.grad = torch.full((3,), 4.0), torch.full((2,), 4.0, dtype=torch.float64)
    norm = clip_grad_norm([a, b], 1.0)
    assert norm.item() == pytest.approx(80 ** 0.5)  # 3 x 16 + 2 x 16
    total = (a.grad.double().pow(2).sum() + b.grad.pow(2).sum()).sqrt()
    assert total.item() == pytest.approx(1.0, rel=1e-5)
    assert clip_grad_norm([nn.Parameter(torch.ones(2))], 1.0).item() == 0.0


@pytest.mark.parametrize("algo", ["dqn", "sac", "td3", "ddpg", "ppo", "a2c"])
def test_the_algorithms_take_the_lean_step(algo, monkeypatch):
    # after the first (torch's own) step, every Adam of the algorithm is on the lean path: a
    # change that silently sent them back to torch.optim's step would fail here
    torchs_steps: list[int] = []
    own_step = torch.optim.Adam.step

    def counted(self, *args, **kwargs):
        torchs_steps.append(id(self))
        return own_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", counted)
    spec = ALGOS[algo]
    discrete = algo in ("dqn", "ppo", "a2c")
    env = EnvSpec((3,), "discrete" if discrete else "box", 2, 4)
    cfg = spec.config(hidden_sizes=[8, 8], **({"optimizer": "adam"} if algo == "a2c" else {}))
    agent = spec.build(cfg, env)
    g = torch.Generator().manual_seed(0)
    actions = torch.randint(0, 2, (16,), generator=g) if discrete else torch.rand(16, 2) * 2 - 1
    for step in range(3):
        if spec.family == "off_policy":
            agent.update(TransitionBatch(torch.randn(16, 3), actions, torch.randn(16),
                                         torch.randn(16, 3), torch.zeros(16)), 10_000 + step)
        else:
            agent.update(RolloutBatch(torch.randn(16, 3), actions, -torch.rand(16),
                                      torch.randn(16), torch.randn(16), torch.randn(16)))
    optimizers = [v for v in vars(agent).values() if isinstance(v, LazyAdam)]
    assert optimizers and all(_fused_adam_lists(o.built) is not None for o in optimizers)
    # torch's step ran once per optimizer (the first step, which makes the state), never again
    assert sorted(torchs_steps) == sorted(id(o.built) for o in optimizers)
