"""`polyak_update` blends parameters and copies buffers (BatchNorm's running statistics), for a
single run's network and for a seed batch's stacked ones alike."""

from __future__ import annotations

import copy

import torch
from torch import nn

from rltrain.algos.steps import polyak_update
from rltrain.nets import seeded
from rltrain.nets.continuous import QEnsemble
from rltrain.nets.seeded import stack_modules
from rltrain.nets.spec import NetSpec

TAU = 0.1


def _trained_norm(module: nn.Module, seed: int) -> None:
    """Training-mode forwards through `module.norm` move its running statistics off their init."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(3):
        module.norm(torch.randn(8, 3, generator=g) * (seed + 2) + seed)


def test_a_networks_target_blends_parameters_and_copies_batchnorm_statistics():
    torch.manual_seed(0)
    source = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    source.norm = source[1]
    target = copy.deepcopy(source)
    _trained_norm(source, 1)
    with torch.no_grad():
        source[0].weight.add_(1.0)
    before = target[0].weight.clone()
    polyak_update(target, source, TAU)
    torch.testing.assert_close(target[0].weight, TAU * source[0].weight + (1 - TAU) * before)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.equal(getattr(target[1], name), getattr(source[1], name)), name
    assert target[1].num_batches_tracked.item() == 3
    assert not torch.equal(target[1].running_mean, torch.zeros(3))


def _critic(seed: int) -> QEnsemble:
    """A twin critic carrying running statistics as buffers of its own (as a batch-normalized
    critic does; a seed batch stacks parameters and buffers alike, whatever holds them)."""
    torch.manual_seed(seed)
    critic = QEnsemble(NetSpec(obs_shape=(3,), hidden=(8,)), action_dim=1, n=2)
    norm = nn.BatchNorm1d(3)
    for name, value in norm.named_buffers():
        critic.register_buffer(name, value.clone())
    critic.norm = _Statistics(critic)
    return critic


class _Statistics:
    """`critic.norm(x)`: a training-mode BatchNorm forward that updates the critic's buffers."""

    def __init__(self, critic: QEnsemble):
        self.critic = critic

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        c = self.critic
        c.num_batches_tracked += 1
        return nn.functional.batch_norm(x, c.running_mean, c.running_var, training=True)


def test_a_seed_batch_updates_each_seeds_target_as_its_single_run_does():
    sources = [_critic(seed) for seed in range(3)]
    targets = [_critic(10 + seed) for seed in range(3)]
    for seed, source in enumerate(sources):
        _trained_norm(source, seed)
    stacked_source, stacked_target = stack_modules(sources), stack_modules(targets)
    assert len(list(stacked_target.buffers())) == 3  # running mean and variance, batches tracked
    polyak_update(stacked_target, stacked_source, TAU)
    for k, (source, target) in enumerate(zip(sources, targets, strict=True)):
        from_batch = copy.deepcopy(target)  # as it was: copy_to must write all of it
        seeded.copy_to(stacked_target, k, from_batch)
        polyak_update(target, source, TAU)  # the single run's update of seed k
        for name, value in target.state_dict().items():
            assert torch.equal(from_batch.state_dict()[name], value), f"seed {k}, {name}"
        assert torch.equal(target.running_var, source.running_var)
    # the seeds' statistics differ, so a seed given another's would fail the comparison above
    assert not torch.equal(sources[0].running_mean, sources[1].running_mean)
