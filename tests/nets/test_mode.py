"""`eval_mode`: evaluation and export run a policy with BatchNorm's running statistics and no
Dropout, and hand it back in the mode it had, submodule by submodule."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from rltrain.config.schema import EnvConfig
from rltrain.envs.make import make_env
from rltrain.evaluation.episodes import EvalInterrupted, run_episodes
from rltrain.export import formats
from rltrain.nets.mode import eval_mode

RUNNING_MEAN = 100.0


class NormedCounterPolicy(nn.Module):
    """A CounterEnv policy behind a BatchNorm whose running mean is 100: with its running
    statistics it ends episodes at k = 2 (returns 6); with batch statistics (training mode) every
    row of equal k normalizes to 0 and it ends each episode at its first step (returns 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(1, affine=False)
        self.norm.running_mean.fill_(RUNNING_MEAN)
        self.seen: list[float] = []

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        z = self.norm(obs[:, :1].float())[:, 0]
        self.seen.extend(z.tolist())
        return (z + RUNNING_MEAN >= 2).long()


def test_eval_mode_switches_every_submodule_and_restores_each_own_mode():
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Dropout(0.5))
    net[1].eval()  # a part already in eval mode (a frozen piece) stays so after
    with eval_mode(net, object()):  # a non-module is left alone
        assert [m.training for m in net.modules()] == [False] * 4
    assert [m.training for m in net.modules()] == [True, True, False, True]


def test_eval_mode_restores_the_mode_when_the_block_raises():
    net = nn.Dropout(0.5)
    with pytest.raises(RuntimeError), eval_mode(net):
        raise RuntimeError("evaluation failed")
    assert net.training


def test_run_episodes_uses_running_statistics_and_hands_the_policy_back_training(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=10), training=False)
    policy = NormedCounterPolicy()
    result = run_episodes(policy, env, episodes=4, seed=0)
    env.close()
    assert result["returns"] == [6.0] * 4 and result["lengths"] == [3] * 4
    # (k − running mean) / sqrt(1 + eps) for k = 0, 1, 2: BatchNorm's own eps of 1e-5
    assert sorted(set(policy.seen)) == pytest.approx([-100.0, -99.0, -98.0], rel=1e-5)
    assert policy.training and policy.norm.training
    # evaluation did not move the statistics (training mode would have, by momentum 0.1)
    assert policy.norm.running_mean.item() == RUNNING_MEAN
    assert policy.norm.num_batches_tracked.item() == 0


def test_an_interrupted_evaluation_hands_the_policy_back_training(counter_env_id):
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=10), training=False)
    policy = NormedCounterPolicy()
    with pytest.raises(EvalInterrupted):
        run_episodes(policy, env, episodes=4, seed=0, stop=lambda: True)
    env.close()
    assert policy.training and policy.norm.training


def test_export_traces_the_eval_mode_network_and_hands_it_back_training(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Linear(4, 2))
    with torch.no_grad():
        net[1].running_mean.uniform_(-1.0, 1.0)
        net[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(5, 3)
    path = tmp_path / "policy.pt"
    formats.write("torchscript", net, x[:2], path)
    assert net.training and all(m.training for m in net.modules())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        traced = torch.jit.load(str(path))
    with torch.no_grad():
        expected = net.eval()(x)
        batch_stats = net.train()(x)  # what a trace in training mode would have computed
    got = traced(x)
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(got, batch_stats)
