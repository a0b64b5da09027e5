"""Each seed of a batch draws what its single run would draw from the global generators."""

from __future__ import annotations

import numpy as np
import torch

from rltrain.seed_batch.rng import SeedStreams


def test_draws_are_each_seeds_own_stream():
    streams = SeedStreams()
    for seed in (3, 4):
        torch.manual_seed(seed)
        streams.capture()
    uniform = streams.draw("uniform", (5, 2))
    normal = streams.draw("normal", (4,))
    perm = streams.randperm(9, [True, True])
    for k, seed in enumerate((3, 4)):
        torch.manual_seed(seed)
        assert torch.equal(uniform[k], torch.rand_like(torch.empty(5, 2)))
        assert torch.equal(normal[k], torch.randn_like(torch.empty(4)))
        assert torch.equal(perm[k], torch.randperm(9))


def test_an_inactive_seed_draws_nothing():
    streams = SeedStreams()
    torch.manual_seed(0)
    streams.capture()
    assert torch.equal(streams.randperm(5, [False])[0], torch.arange(5))
    torch.manual_seed(0)
    assert torch.equal(streams.draw("uniform", (3,))[0], torch.rand(3))


def test_as_global_swaps_the_seed_in_and_keeps_what_it_drew():
    streams = SeedStreams()
    for seed in (0, 1):
        torch.manual_seed(seed)
        np.random.seed(seed)
        streams.capture()
    torch.manual_seed(99)
    outside = torch.get_rng_state()
    with streams.as_global(1):
        first = torch.rand(2)
        np_first = np.random.rand()
    assert torch.equal(torch.get_rng_state(), outside)  # the process's own state is back
    torch.manual_seed(1)
    np.random.seed(1)
    assert torch.equal(first, torch.rand(2))
    assert np_first == np.random.rand()
    expected = _after(1, 2)  # seed 1's stream, past the two draws already taken
    with streams.as_global(1):  # seed 1 continues where it stopped
        assert torch.equal(torch.rand(2), expected)


def _after(seed: int, skip: int) -> torch.Tensor:
    torch.manual_seed(seed)
    torch.rand(skip)
    return torch.rand(2)
