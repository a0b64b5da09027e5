"""PPO: losses on hand-made numbers, updates on synthetic batches, and seeded determinism."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from rltrain import api
from rltrain.algos.base import explained_variance, normalized
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.ppo import PPO, clipped_surrogate, value_loss
from rltrain.parallel.world import SOLO
from rltrain.runner.runner import Runner
from rltrain.types import EnvSpec, RolloutBatch

METRICS = ("train/policy_loss", "train/value_loss", "train/entropy_loss", "train/approx_kl",
           "train/clip_fraction", "train/explained_variance", "train/learning_rate",
           "train/grad_norm")
SPECS = {"discrete": EnvSpec((4,), "discrete", 2, 2), "box": EnvSpec((3,), "box", 2, 2)}


def small_ppo(kind: str = "discrete", **changes) -> PPO:
    cfg = PPOConfig(**{"n_steps": 16, "batch_size": 8, "n_epochs": 2, "hidden_sizes": [16],
                       **changes})
    return PPO(cfg, SPECS[kind])


def synthetic_batch(algo: PPO, size: int = 32) -> RolloutBatch:
    """Observations and advantages from a fixed generator; log-probs and values from `algo`."""
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(size, *algo.spec.obs_shape, generator=g)
    actions, log_probs, values = algo.act(obs)
    advantages = torch.randn(size, generator=g)
    return RolloutBatch(obs, actions, log_probs, values, advantages, values + advantages)


@pytest.mark.parametrize("kind", ["discrete", "box"])
def test_update_changes_every_parameter_and_reports_the_stable_metrics(kind):
    torch.manual_seed(0)
    algo = small_ppo(kind)
    before = {k: v.clone() for k, v in algo.policy.named_parameters()}
    metrics = algo.update(synthetic_batch(algo))
    for name, param in algo.policy.named_parameters():
        assert not torch.equal(param, before[name]), f"{name} did not change"
    assert set(METRICS) <= set(metrics)
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    assert 0.0 <= metrics["train/clip_fraction"] <= 1.0
    assert metrics["train/approx_kl"] >= 0.0
    assert metrics["train/learning_rate"] == 3e-4
    assert metrics["train/n_updates"] == 2 * 32 / 8  # epochs × minibatches


def test_entropy_loss_of_a_fresh_discrete_policy_is_minus_log_of_the_action_count():
    torch.manual_seed(0)
    algo = small_ppo("discrete", lr=1e-9)  # near-uniform logits (0.01 init gain), tiny steps
    metrics = algo.update(synthetic_batch(algo))
    assert metrics["train/entropy_loss"] == pytest.approx(-math.log(2), abs=1e-3)
    assert metrics["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)  # ratio stays 1
    assert metrics["train/clip_fraction"] == 0.0


def test_box_update_reports_the_policy_std():
    torch.manual_seed(0)
    metrics = small_ppo("box", log_std_init=math.log(0.5), lr=1e-9).update(
        synthetic_batch(small_ppo("box")))
    assert metrics["train/std"] == pytest.approx(0.5, rel=1e-4)


def test_annealed_learning_rate_scales_with_the_remaining_progress():
    algo = small_ppo(anneal_lr=True, lr=1e-3)
    metrics = algo.update(synthetic_batch(algo), progress_remaining=0.25)
    assert metrics["train/learning_rate"] == pytest.approx(2.5e-4)
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(2.5e-4)


def test_target_kl_stops_the_epochs_early():
    torch.manual_seed(0)
    algo = small_ppo(n_epochs=10, target_kl=1e-9, lr=1e-2)
    metrics = algo.update(synthetic_batch(algo))
    assert metrics["train/n_updates"] == 32 / 8  # one epoch of 4 minibatches, then stop


def test_clipped_surrogate_matches_hand_computed_values():
    ratio = torch.tensor([0.5, 1.0, 1.5])
    adv = torch.tensor([1.0, -1.0, 2.0])
    loss, clip_frac = clipped_surrogate(ratio.log(), adv, 0.2)
    # r·A = [0.5, −1, 3]; clip(r, 0.8, 1.2)·A = [0.8, −1, 2.4]; min = [0.5, −1, 2.4]
    assert loss.item() == pytest.approx(-(0.5 - 1.0 + 2.4) / 3)
    assert clip_frac.item() == pytest.approx(2 / 3)  # |r − 1| > 0.2 for 0.5 and 1.5
    # a seed batch's rows [S, B]: one value per seed, each its single minibatch's
    ratios, advs = torch.stack([ratio, torch.ones(3)]), torch.stack([adv, adv])
    losses, fracs = clipped_surrogate(ratios.log(), advs, 0.2)
    assert losses.tolist() == pytest.approx([-(0.5 - 1.0 + 2.4) / 3, -(1.0 - 1.0 + 2.0) / 3])
    assert fracs.tolist() == pytest.approx([2 / 3, 0.0])


def test_value_loss_with_and_without_clipping_matches_hand_computed_values():
    values, old, returns = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0]), torch.zeros(2)
    assert value_loss(values, old, returns, None).item() == pytest.approx((1 + 9) / 2)
    # clipped values: old ± 0.5 = [1.5, 2.5] → squared errors [2.25, 6.25]; max with [1, 9]
    assert value_loss(values, old, returns, 0.5).item() == pytest.approx((2.25 + 9) / 2)
    per_seed = value_loss(torch.stack([values, old]), torch.stack([old, old]),
                          torch.zeros(2, 2), 0.5)
    assert per_seed.tolist() == pytest.approx([(2.25 + 9) / 2, 4.0])


@pytest.mark.parametrize("kind, action_shape, action_dtype", [
    ("discrete", (5,), torch.long), ("box", (5, 2), torch.float32)])
def test_act_returns_batched_action_log_prob_and_value(kind, action_shape, action_dtype):
    algo = small_ppo(kind)
    obs = torch.randn(5, *algo.spec.obs_shape)
    action, log_prob, value = algo.act(obs)
    assert action.shape == action_shape and action.dtype == action_dtype
    assert log_prob.shape == value.shape == (5,)
    assert torch.equal(value, algo.value(obs))
    assert algo.policy.act(obs, deterministic=True).shape == action_shape


def test_state_dict_round_trip_restores_policy_and_optimizer():
    torch.manual_seed(0)
    trained = small_ppo()
    trained.update(synthetic_batch(trained))
    torch.manual_seed(1)
    fresh = small_ppo()
    fresh.load_state_dict(trained.state_dict())
    obs = torch.randn(6, 4)
    assert torch.equal(fresh.value(obs), trained.value(obs))
    assert torch.equal(fresh.policy.act(obs), trained.policy.act(obs))
    step_a = fresh.optimizer.state_dict()["state"][0]["step"]
    assert step_a == trained.optimizer.state_dict()["state"][0]["step"] == 8


def trained_parameters(cfg, run_dir) -> dict[str, torch.Tensor]:
    runner = Runner(cfg, run_dir)
    runner.run()
    return {k: v.clone() for k, v in runner.algo.policy.state_dict().items()}


def test_same_seed_gives_identical_parameters_and_different_seeds_diverge(tmp_path, tiny_cfg):
    a = trained_parameters(tiny_cfg(seed=7), tmp_path / "a")
    b = trained_parameters(tiny_cfg(seed=7), tmp_path / "b")
    c = trained_parameters(tiny_cfg(seed=8), tmp_path / "c")
    assert a.keys() == b.keys() == c.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs between runs with the same seed"
    assert any(not torch.equal(a[name], c[name]) for name in a)


@pytest.mark.slow  # tens of seconds: `make test-all` / `make bench-quality`
def test_ppo_with_the_tuned_preset_learns_cartpole(tmp_path):
    # Seeded, about 20 s: random play scores ≈ 20, the tuned preset reaches ≈ 400 by 20k steps.
    result = api.train(["env=CartPole-v1", "total_timesteps=20000", "seed=0", "progress=off",
                        "logger=none", "eval.freq=0", "checkpoint.freq=0"], run_dir=tmp_path)
    assert result["episodes"] == 10
    assert result["mean_reward"] >= 200, result["returns"]


@pytest.mark.slow
@pytest.mark.parametrize(("env", "threshold"), [("Pendulum-v1", -200.0), ("CartPole-v1", 475.0)])
def test_tuned_ppo_preset_solves_its_env_within_its_budget(tmp_path, env, threshold):
    """The preset's own budget, 10 final deterministic episodes, median over seeds 0-2 (as
    `make bench-quality` judges a preset; ~10-40 s a seed). One seed may miss: since the action
    layers follow `ortho_init` (2026-11-24), CartPole seed 0 ends its 60k steps at 227.7 while
    seeds 1 and 2 hold 500."""
    finals = [api.train([f"env={env}", f"seed={seed}", "progress=off", "logger=none",
                         "eval.episodes=10", "checkpoint.freq=0"],
                        run_dir=tmp_path / str(seed))["mean_reward"] for seed in (0, 1, 2)]
    assert sorted(finals)[1] >= threshold, finals


def test_adam_eps_reaches_the_optimizer():
    assert small_ppo().optimizer.defaults["eps"] == 1e-5
    assert small_ppo(adam_eps=1e-8).optimizer.defaults["eps"] == 1e-8


def test_normalized_leaves_one_sample_as_it_is_and_scales_more_per_row():
    one = torch.tensor([[3.0], [-2.0]])  # [S, 1]: one sample per seed
    assert torch.equal(normalized(one), one)
    assert torch.equal(normalized(torch.tensor([3.0]), SOLO.moments(torch.tensor([3.0]))),
                       torch.tensor([3.0]))
    out = normalized(torch.tensor([[1.0, 2.0, 3.0], [10.0, 10.0, 40.0]]))
    assert torch.allclose(out, torch.tensor([[-1.0, 0.0, 1.0], [-0.57735, -0.57735, 1.15470]]),
                          atol=1e-4)


def test_moments_and_explained_variance_of_one_sample_warn_nothing():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*degrees of freedom")
        mean, std = SOLO.moments(torch.tensor([2.5]))
        ev = explained_variance(torch.tensor([1.0]), torch.tensor([2.0]))
    assert (mean.item(), std.item()) == (2.5, 0.0)
    assert math.isnan(ev)


def test_a_one_sample_minibatch_steps_as_if_normalization_were_off():
    steps = {}
    for normalize in (True, False):
        torch.manual_seed(0)
        algo = small_ppo(normalize_advantage=normalize)
        algo.update(synthetic_batch(algo, size=1))
        steps[normalize] = algo.policy.state_dict()
    for name, value in steps[True].items():
        assert torch.equal(value, steps[False][name]), name


@pytest.mark.parametrize("num_seeds", [1, 2])
def test_a_last_rollout_of_one_step_trains_without_a_torch_warning(tmp_path, tiny_cfg, num_seeds):
    # 16 steps, then 1: the last rollout is one minibatch of one sample
    cfg = tiny_cfg(total_timesteps=17, num_seeds=num_seeds, env={"num_envs": 1},
                   algo={"batch_size": 8})
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*degrees of freedom")
        api.train(cfg, run_dir=tmp_path / "run")
    assert (tmp_path / "run").is_dir()
