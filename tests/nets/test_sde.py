"""gSDE: the noise is φ(s) · Θ with Θ held between resamples, the density is the Gaussian with
std sqrt(φ² σ²), and the noise is drawn again exactly when the clock says."""

from __future__ import annotations

import math

import pytest
import torch

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.ppo import PPO
from rltrain.algos.sac import SAC
from rltrain.config.compose import compose_train_config
from rltrain.errors import UserError
from rltrain.nets.sde import NoiseClock, SDEHead, StateDependentNoise
from rltrain.types import EnvSpec

BOX = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=4)


def test_noise_clock_fires_at_restart_and_every_period():
    every3 = NoiseClock(3)
    assert [every3.tick() for _ in range(7)] == [True, False, False, True, False, False, True]
    once = NoiseClock(-1)
    assert [once.tick() for _ in range(4)] == [True, False, False, False]
    once.restart()
    assert once.tick() and not once.tick()


def test_action_std_is_the_root_of_squared_features_times_squared_sigma():
    sde = StateDependentNoise(2, 1, log_std_init=0.0)
    with torch.no_grad():
        sde.log_std.copy_(torch.log(torch.tensor([[2.0], [3.0]])))
    phi = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    expected = torch.tensor([[math.sqrt(4 + 9 + 1e-6)], [math.sqrt(36 + 1e-6)]])
    assert torch.allclose(sde.action_std(phi), expected)


def test_expln_grows_logarithmically_above_zero_and_matches_exp_below():
    sde = StateDependentNoise(1, 2, 0.0, use_expln=True)
    with torch.no_grad():
        sde.log_std.copy_(torch.tensor([[-1.0, 2.0]]))
    assert torch.allclose(sde.std(), torch.tensor([[math.exp(-1.0), math.log(3.0) + 1.0]]))


def test_sde_head_log_prob_is_the_gaussian_density_with_the_state_dependent_std():
    torch.manual_seed(0)
    head = SDEHead(3, 2, log_std_init=-1.0)
    phi, action = torch.randn(5, 3), torch.randn(5, 2)
    dist = head(phi)
    std = torch.sqrt(phi.pow(2) @ head.sde.std().pow(2) + 1e-6)
    reference = torch.distributions.Normal(head.mean(phi), std)
    assert torch.allclose(head.log_prob(dist, action), reference.log_prob(action).sum(-1), atol=1e-6)
    assert torch.allclose(head.entropy(dist), reference.entropy().sum(-1), atol=1e-6)


def test_held_noise_repeats_for_the_same_features_until_resampled():
    torch.manual_seed(0)
    head = SDEHead(3, 2, log_std_init=0.0)
    phi = torch.randn(4, 3)
    first, again = head(phi).sample(), head(phi).sample()
    assert torch.equal(first, again)
    head.sde.resample(4)
    assert not torch.allclose(first, head(phi).sample())
    # each env row has its own matrix: the same features in two rows give different noise
    same_rows = phi[:1].expand(4, 3)
    noise = head.sde.noise(same_rows)
    assert not torch.allclose(noise[0], noise[1])


def _matrices_after_each_act(algo, obs_fn, steps: int) -> list[torch.Tensor]:
    seen = []
    for _ in range(steps):
        obs_fn(algo)
        seen.append(algo_matrices(algo).clone())
    return seen


def algo_matrices(algo) -> torch.Tensor:
    return algo.policy.head.sde.matrices if isinstance(algo, PPO) else algo.actor.sde.matrices


def _changes(seen: list[torch.Tensor]) -> list[int]:
    """The acting calls (0-based) at which the held matrices were new."""
    return [0] + [i for i in range(1, len(seen)) if not torch.equal(seen[i], seen[i - 1])]


@pytest.mark.parametrize("freq, expected", [(-1, [0]), (2, [0, 2, 4]), (4, [0, 4])])
def test_ppo_resamples_at_the_rollout_start_and_every_sde_sample_freq_steps(freq, expected):
    torch.manual_seed(0)
    ppo = PPO(PPOConfig(use_sde=True, sde_sample_freq=freq, hidden_sizes=[8]), BOX)
    obs = torch.randn(4, 3)
    assert _changes(_matrices_after_each_act(ppo, lambda a: a.act(obs), 6)) == expected
    ppo.noise_clock.restart()  # what update() does: the next rollout starts with new noise
    before = ppo.policy.head.sde.matrices.clone()
    ppo.act(obs)
    assert not torch.equal(before, ppo.policy.head.sde.matrices)


@pytest.mark.parametrize("freq, train_freq, expected", [(-1, 3, [0, 3]), (2, 1, [0, 2, 4])])
def test_sac_resamples_every_sde_sample_freq_or_every_train_freq_steps(freq, train_freq, expected):
    torch.manual_seed(0)
    sac = SAC(SACConfig(use_sde=True, sde_sample_freq=freq, train_freq=train_freq,
                        hidden_sizes=[8]), BOX)
    obs = torch.randn(4, 3)
    assert _changes(_matrices_after_each_act(sac, lambda a: a.act(obs, 0), 6)) == expected


def test_sac_gsde_actions_stay_in_bounds_and_gradients_reach_sigma():
    torch.manual_seed(0)
    sac = SAC(SACConfig(use_sde=True, log_std_init=1.0, hidden_sizes=[8]), BOX)
    action = sac.act(torch.randn(4, 3) * 100, 0)
    assert action.abs().max() <= 1.0
    a, log_prob = sac.actor(torch.randn(6, 3))
    log_prob.sum().backward()
    assert sac.actor.sde.log_std.grad is not None and sac.actor.sde.log_std.grad.abs().sum() > 0


@pytest.mark.parametrize("overrides, message", [
    (["algo=ppo", "env=CartPole-v1", "algo.use_sde=true"], "gSDE is for Box"),
    (["algo=sac", "env=Pendulum-v1", "algo.use_sde=true", "algo.sde_sample_freq=0"],
     "algo.sde_sample_freq=0 must be -1"),
])
def test_bad_gsde_settings_are_one_line_errors(overrides, message, tmp_path):
    from rltrain.runner.runner import Runner

    with pytest.raises(UserError, match=message):
        Runner(compose_train_config([*overrides, "logger=none", "progress=off"]), tmp_path)


@pytest.mark.parametrize("bad", [{"matrices": "x", "count": 1},
                                 {"matrices": torch.zeros(2, 5, 5), "count": 1},
                                 {"matrices": torch.zeros(2, 8, 2), "count": "3"}])
def test_a_damaged_saved_noise_is_refused_in_one_line(bad, tmp_path):
    from rltrain.evaluation.agent import load_algo

    sac = SAC(SACConfig(use_sde=True, hidden_sizes=[8]), BOX)
    state = sac.state_dict()
    state["sde"] = bad
    with pytest.raises(UserError, match="saved gSDE noise does not fit"):
        load_algo(sac, state, tmp_path / "x.pt")
