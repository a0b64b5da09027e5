"""`FusedAdam` and the lean gradient clip (`rltrain/algos/optim.py`) give torch's results bit for
bit and keep torch's state format; Adam falls back to torch's own where no fused kernel exists."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rltrain.algos import optim
from rltrain.algos.optim import FusedAdam, adam, clip_grad_norm
from rltrain.config.registry import ALGOS
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
                               if isinstance(opt, FusedAdam)
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


def test_state_moves_both_ways_and_training_goes_on_bit_for_bit():
    ours, theirs = net(), net()
    lean, reference = adam(ours.parameters(), 1e-2), fused_adam(theirs)
    train(ours, lean, 3)
    train(theirs, reference, 3)
    # swap: each continues from the other's state, on a copy of the other's network
    ours2, theirs2 = copy.deepcopy(theirs), copy.deepcopy(ours)
    lean2, reference2 = adam(ours2.parameters(), 1.0), fused_adam(theirs2)
    lean2.load_state_dict(reference.state_dict())
    reference2.load_state_dict(lean.state_dict())
    assert float(lean2.state_dict()["state"][0]["step"]) == 3.0
    assert lean2.param_groups[0]["lr"] == reference.param_groups[0]["lr"]  # the saved lr, as torch
    train(ours2, lean2, 4)
    train(theirs2, reference2, 4)
    assert all(torch.equal(a, b) for a, b in zip(ours2.parameters(), theirs2.parameters(),
                                                 strict=True))
    # the loaded state is a copy: stepping does not write into the dict it came from
    saved = lean2.state_dict()
    before = saved["state"][0]["exp_avg"].clone()
    fresh = adam(net().parameters(), 1e-2)
    fresh.load_state_dict(saved)
    train(ours2, lean2, 1)
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], before)


def test_zero_grad_drops_every_gradient_or_zeroes_them_when_asked():
    model = net()
    lean = adam(model.parameters(), 1e-2)
    model(torch.ones(1, 4)).sum().backward()
    lean.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    lean.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_a_parameter_without_a_gradient_keeps_its_value_and_state_as_torch_does():
    ours, theirs = net(), net()
    lean, reference = adam(ours.parameters(), 1e-2), fused_adam(theirs)
    for model, opt in ((ours, lean), (theirs, reference)):
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        model[2].bias.grad = None
        before = model[2].bias.detach().clone()
        opt.step()
        assert torch.equal(model[2].bias, before)
    mine, its = lean.state_dict()["state"], reference.state_dict()["state"]
    assert float(mine[3]["step"]) == float(its[3]["step"]) == 1.0  # the bias skipped step two
    assert float(mine[0]["step"]) == 2.0
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters(),
                                                 strict=True))


def test_parameters_of_two_dtypes_step_as_torchs_fused_adam_steps_them():
    def pair() -> list[nn.Parameter]:
        torch.manual_seed(3)
        return [nn.Parameter(torch.randn(5)), nn.Parameter(torch.randn(3, dtype=torch.float64))]

    ours, theirs = pair(), pair()
    lean = adam(ours, 1e-2)
    reference = torch.optim.Adam(theirs, lr=1e-2, fused=True)
    for _ in range(3):
        for params, opt in ((ours, lean), (theirs, reference)):
            opt.zero_grad()
            (params[0].pow(3).sum() + params[1].sin().sum()).backward()
            opt.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert lean.state_dict()["state"][1]["exp_avg"].dtype == torch.float64


@pytest.mark.parametrize("damage", ["one parameter fewer", "another shape", "amsgrad",
                                    "weight decay", "a missing moment"])
def test_a_state_that_does_not_fit_is_refused_with_a_value_error(damage):
    model = net()
    lean = adam(model.parameters(), 1e-2)
    train(model, lean, 1)
    saved = copy.deepcopy(lean.state_dict())
    group, state = saved["param_groups"][0], saved["state"]
    if damage == "one parameter fewer":
        group["params"].pop()
    elif damage == "another shape":
        state[0]["exp_avg"] = torch.zeros(2, 2)
    elif damage == "amsgrad":
        group["amsgrad"] = True
    elif damage == "weight decay":
        group["weight_decay"] = 0.1
    else:
        del state[1]["exp_avg_sq"]
    kept = copy.deepcopy(lean.state_dict())
    with pytest.raises(ValueError):
        lean.load_state_dict(saved)
    after = lean.state_dict()  # a refused state changes nothing
    assert after["param_groups"] == kept["param_groups"]
    assert all(torch.equal(after["state"][k][n], t) for k, s in kept["state"].items()
               for n, t in s.items())


def test_without_a_fused_kernel_adam_is_torchs_own_built_on_first_use(monkeypatch):
    monkeypatch.setattr(optim, "has_fused_adam", lambda device, dtype: False)
    model = net()
    plain = optim.adam(model.parameters(), 1e-2)
    assert isinstance(plain, optim.LazyOptimizer)
    model(torch.ones(1, 4)).sum().backward()
    plain.step()
    assert type(plain.built) is torch.optim.Adam and not plain.built.param_groups[0]["fused"]


def test_this_torch_build_has_the_fused_cpu_kernel():
    # rltrain pins torch >= 2.4 in its install path; without the kernel every run would fall
    # back to torch.optim (and pay its torch._dynamo import)
    assert optim.has_fused_adam(torch.device("cpu"), torch.float32)


def test_clip_of_mixed_dtypes_and_no_gradients_falls_back_to_torch():
    a = nn.Parameter(torch.ones(3))
    b = nn.Parameter(torch.ones(2, dtype=torch.float64))
    a.grad, b.grad = torch.full((3,), 4.0), torch.full((2,), 4.0, dtype=torch.float64)
    norm = clip_grad_norm([a, b], 1.0)
    assert norm.item() == pytest.approx(80 ** 0.5)  # 3 x 16 + 2 x 16
    total = (a.grad.double().pow(2).sum() + b.grad.pow(2).sum()).sqrt()
    assert total.item() == pytest.approx(1.0, rel=1e-5)
    assert clip_grad_norm([nn.Parameter(torch.ones(2))], 1.0).item() == 0.0


def test_rmsprop_steps_as_torchs_bit_for_bit_and_their_states_interchange():
    ours, theirs = net(), net()
    lean = optim.RMSprop(list(ours.parameters()), 1e-2, alpha=0.99, eps=1e-5)
    reference = torch.optim.RMSprop(theirs.parameters(), lr=1e-2, alpha=0.99, eps=1e-5)
    assert train(ours, lean, 25, 0.5) == train(theirs, reference, 25, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters(),
                                                 strict=True))
    mine, its = lean.state_dict(), reference.state_dict()
    assert mine["param_groups"] == its["param_groups"]
    assert all(torch.equal(mine["state"][k][n], t) for k, s in its["state"].items()
               for n, t in s.items())
    back = optim.RMSprop(list(net().parameters()), 1.0, alpha=0.5, eps=1.0)
    back.load_state_dict(its)
    assert back.param_groups[0]["alpha"] == 0.99 and float(back.state[
        back.param_groups[0]["params"][0]]["step"]) == 25.0
    momentum = copy.deepcopy(its)
    momentum["param_groups"][0]["momentum"] = 0.9
    with pytest.raises(ValueError, match="momentum"):
        back.load_state_dict(momentum)


@pytest.mark.parametrize(("algo", "extra"), [("dqn", {}), ("sac", {}), ("td3", {}), ("ddpg", {}),
                                             ("ppo", {}), ("a2c", {}),
                                             ("a2c", {"optimizer": "adam"})])
def test_the_algorithms_never_build_a_torch_optim_optimizer(algo, extra, monkeypatch):
    # a change that sent an algorithm back to torch.optim would import torch._dynamo again (a
    # second of every run's start) and fail here
    def refused(*args, **kwargs):
        raise AssertionError("a torch.optim optimizer was built")

    monkeypatch.setattr(torch.optim.Optimizer, "__init__", refused)
    spec = ALGOS[algo]
    discrete = algo in ("dqn", "ppo", "a2c")
    env = EnvSpec((3,), "discrete" if discrete else "box", 2, 4)
    agent = spec.build(spec.config(hidden_sizes=[8, 8], **extra), env)
    g = torch.Generator().manual_seed(0)
    actions = torch.randint(0, 2, (16,), generator=g) if discrete else torch.rand(16, 2) * 2 - 1
    for step in range(3):
        if spec.family == "off_policy":
            agent.update(TransitionBatch(torch.randn(16, 3), actions, torch.randn(16),
                                         torch.randn(16, 3), torch.zeros(16)), 10_000 + step)
        else:
            agent.update(RolloutBatch(torch.randn(16, 3), actions, -torch.rand(16),
                                      torch.randn(16), torch.randn(16), torch.randn(16)))
    optimizers = [v for v in vars(agent).values() if isinstance(v, FusedAdam | optim.RMSprop)]
    assert optimizers and not [v for v in vars(agent).values()
                               if isinstance(v, optim.LazyOptimizer)]
    assert all(float(o.state_dict()["state"][0]["step"]) >= 1 for o in optimizers)
