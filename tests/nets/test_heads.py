"""The light action distributions agree with torch.distributions."""

from __future__ import annotations

import math

import torch
from torch.distributions import Categorical, Normal

from rltrain.nets.heads import CategoricalDist, DiagGaussianDist


def test_categorical_log_prob_entropy_and_mode_match_torch():
    torch.manual_seed(0)
    logits, action = torch.randn(500, 4), torch.randint(0, 4, (500,))
    ours, ref = CategoricalDist(logits), Categorical(logits=logits)
    torch.testing.assert_close(ours.log_prob(action), ref.log_prob(action))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    assert torch.equal(ours.mode(), logits.argmax(-1))


def test_categorical_samples_follow_the_probabilities():
    torch.manual_seed(0)
    dist = CategoricalDist(torch.tensor([[0.0, math.log(3.0)]]).expand(100_000, 2))
    assert abs(dist.sample().float().mean().item() - 0.75) < 0.01  # p(1) = 3 / 4


def test_gaussian_log_prob_and_entropy_match_torch_summed_over_dims():
    torch.manual_seed(0)
    mean, log_std, x = torch.randn(300, 3), torch.randn(3) * 0.5, torch.randn(300, 3)
    ours, ref = DiagGaussianDist(mean, log_std), Normal(mean, log_std.exp())
    torch.testing.assert_close(ours.log_prob(x), ref.log_prob(x).sum(-1))
    torch.testing.assert_close(ours.entropy(), ref.entropy().sum(-1))
    samples = DiagGaussianDist(torch.zeros(100_000, 1), torch.tensor([math.log(2.0)])).sample()
    assert abs(samples.std().item() - 2.0) < 0.03 and abs(samples.mean().item()) < 0.03
