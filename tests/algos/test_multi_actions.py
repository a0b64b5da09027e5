"""MultiDiscrete and MultiBinary actions for PPO and A2C (and recurrent PPO): the distributions
on tiny known cases, training + eval + exact resume + export parity per (space, algorithm),
and the one-line refusals of the algorithms that cannot act in them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config
from rltrain.config.validation import to_train_config
from rltrain.envs.trust import NamedCode
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.nets.heads import BernoulliDist, CategoricalDist, MultiCategoricalDist
from rltrain.runner.runner import Runner

TRUSTED = NamedCode(frozenset({"tests.envs.space_envs"}))  # as env.import= on the command line
ENVS = {"MultiDiscreteAction": "multi_discrete", "MultiBinaryAction": "multi_binary"}


def overrides(env_class: str, algo: str, steps: int = 192, *extra: str) -> list[str]:
    out = [f"algo={algo}", f"env.id=tests.envs.space_envs:{env_class}", "env.num_envs=2",
           f"total_timesteps={steps}", "algo.hidden_sizes=[16]", "eval.episodes=2",
           "eval.num_envs=2", "logger=none", "progress=off", f"checkpoint.freq={steps // 2}"]
    if algo.startswith("ppo"):
        out += ["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=2"]
    else:
        out += ["algo.n_steps=8"]
    if algo == "ppo_lstm":
        out += ["algo.recurrent_hidden_size=8"]
    return out + list(extra)


def test_multi_categorical_sums_one_categorical_per_dimension():
    logits = torch.tensor([[0.0, 1.0, 2.0, 0.5, -0.5]])  # dims of 3 and 2 choices
    dist = MultiCategoricalDist(logits, (3, 2))
    first, second = CategoricalDist(logits[:, :3]), CategoricalDist(logits[:, 3:])
    action = torch.tensor([[2, 1]])
    assert torch.allclose(dist.log_prob(action),
                          first.log_prob(action[:, 0]) + second.log_prob(action[:, 1]))
    assert torch.allclose(dist.entropy(), first.entropy() + second.entropy())
    assert dist.mode().tolist() == [[2, 0]]
    samples = MultiCategoricalDist(logits.expand(4000, 5), (3, 2)).sample()
    assert samples.shape == (4000, 2) and samples[:, 0].max() <= 2 and samples[:, 1].max() <= 1
    p_third = math.exp(2) / (1 + math.e + math.exp(2))
    assert abs((samples[:, 0] == 2).float().mean().item() - p_third) < 0.03


def test_bernoulli_log_prob_entropy_and_mode_match_the_closed_form():
    logits = torch.tensor([[0.0, math.log(3.0), -40.0]])  # p = 0.5, 0.75, ~0
    dist = BernoulliDist(logits)
    action = torch.tensor([[1.0, 0.0, 0.0]])
    assert dist.log_prob(action).item() == pytest.approx(math.log(0.5) + math.log(0.25), abs=1e-6)
    h = lambda p: -(p * math.log(p) + (1 - p) * math.log(1 - p))  # noqa: E731
    assert dist.entropy().item() == pytest.approx(h(0.5) + h(0.75), abs=1e-6)  # ~0 for the third
    assert dist.mode().tolist() == [[0.0, 1.0, 0.0]]
    assert torch.isfinite(BernoulliDist(torch.tensor([[80.0, -80.0]])).log_prob(
        torch.tensor([[0.0, 1.0]]))).all()  # a sure policy and the other action: finite
    sample = BernoulliDist(logits.expand(4000, 3)).sample()
    assert abs(sample[:, 1].mean().item() - 0.75) < 0.03 and sample[:, 2].sum() == 0


@pytest.mark.parametrize("env_class", sorted(ENVS))
@pytest.mark.parametrize("algo", ["ppo", "a2c", "ppo_lstm"])
def test_on_policy_algos_train_evaluate_and_resume_on_multi_actions(algo, env_class, tmp_path):
    runner = Runner(compose_train_config(overrides(env_class, algo)), tmp_path / "a")
    assert runner.env.spec.action_kind == ENVS[env_class]
    result = runner.run()  # the env asserts every action is in its space
    assert result["episodes"] == 2 and np.isfinite(result["mean_reward"])
    assert evaluate(tmp_path / "a", episodes=2, named=TRUSTED)["episodes"] == 2
    half = checkpoint.load(sorted((tmp_path / "a" / "checkpoints").glob("step_*.pt"))[0])
    Runner(to_train_config(half["config"]), tmp_path / "r", resume_from=half).run()
    a = checkpoint.load(tmp_path / "a" / "checkpoints" / "final.pt")["algo"]["policy"]
    r = checkpoint.load(tmp_path / "r" / "checkpoints" / "final.pt")["algo"]["policy"]
    assert all(torch.equal(a[k], r[k]) for k in a)


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize("env_class", sorted(ENVS))
def test_a_multi_action_policy_exports_with_identical_actions(env_class, fmt, tmp_path):
    from rltrain.export.command import export_policy

    Runner(compose_train_config(overrides(env_class, "ppo", 64)), tmp_path).run()
    result = export_policy(tmp_path, fmt, check_samples=64, named=TRUSTED)
    assert result["ok"] and result["mismatches"] == 0, result
    assert result["action_shape"] == [3]


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_discrete_space_with_a_start_gets_actions_counted_from_it(algo, tmp_path):
    """Discrete(3, start=-1): the env receives -1, 0, 1 (it asserts so), and learns to hit its
    target in training, in eval and in the exported policy (which outputs env actions)."""
    from rltrain.export.command import export_policy

    extra = (["algo.learning_starts=200", "algo.exploration_steps=1000", "algo.lr=3e-3"]
             if algo == "dqn" else ["algo.lr=3e-3", "algo.ent_coef=0.0"])
    cfg = compose_train_config([f"algo={algo}", "env.id=tests.envs.space_envs:DiscreteStartAction",
                                "env.num_envs=2", "total_timesteps=3000", "algo.hidden_sizes=[32]",
                                "eval.episodes=4", "eval.num_envs=2", "logger=none",
                                "progress=off", "checkpoint.freq=0", "seed=0", *extra])
    result = Runner(cfg, tmp_path).run()
    assert result["mean_reward"] >= 7.0  # of 8: the start is applied (0-based actions: ~2.7)
    assert evaluate(tmp_path, episodes=4, named=TRUSTED)["mean_reward"] >= 7.0
    exported = export_policy(tmp_path, "torchscript", check_samples=64, named=TRUSTED)
    assert exported["ok"] and exported["mismatches"] == 0, exported


@pytest.mark.parametrize("algo", ["dqn", "sac", "td3", "ddpg"])
@pytest.mark.parametrize("env_class", sorted(ENVS))
def test_algorithms_without_multi_actions_refuse_in_one_line(algo, env_class, tmp_path):
    space = "MultiDiscrete" if env_class.startswith("MultiDiscrete") else "MultiBinary"
    cfg = compose_train_config([f"algo={algo}", f"env.id=tests.envs.space_envs:{env_class}",
                                "env.num_envs=2", "total_timesteps=64", "logger=none",
                                "progress=off"])
    with pytest.raises(UserError, match=f"{space} action space; algorithms that fit: a2c, ppo"):
        Runner(cfg, tmp_path)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "ppo_lstm"])
def test_multi_discrete_masks_are_honoured_in_training_and_eval(algo, tmp_path):
    # the env raises on any masked-out choice: finishing is the check
    result = Runner(compose_train_config(overrides("MaskedMultiDiscreteAction", algo)),
                    tmp_path).run()
    assert result["episodes"] == 2


def test_the_strict_multi_discrete_env_does_catch_an_agent_that_ignores_the_mask(tmp_path,
                                                                                  monkeypatch):
    import rltrain.runner.on_policy as loop
    from rltrain.errors import EnvError

    monkeypatch.setattr(loop, "action_mask", lambda env: None)
    with pytest.raises(EnvError, match="InvalidChoice"):
        Runner(compose_train_config(overrides("MaskedMultiDiscreteAction", "ppo")), tmp_path).run()


def test_a_masked_multi_discrete_distribution_only_picks_valid_choices():
    logits = torch.zeros(500, 5)  # dims of 3 and 2 choices
    mask = torch.tensor([[False, True, False, True, True]]).expand(500, 5)
    dist = MultiCategoricalDist(logits, (3, 2), mask)
    sample = dist.sample()
    assert (sample[:, 0] == 1).all()  # the only valid choice of the first dimension
    assert dist.entropy()[0].item() == pytest.approx(math.log(2))  # 0 + log 2
    assert dist.log_prob(torch.tensor([[1, 0]] * 500))[0].item() == pytest.approx(math.log(0.5))


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_a_masked_multi_discrete_policy_exports_with_the_mask_as_an_input(fmt, tmp_path):
    from rltrain.export.command import export_policy

    Runner(compose_train_config(overrides("MaskedMultiDiscreteAction", "ppo", 64)), tmp_path).run()
    result = export_policy(tmp_path, fmt, check_samples=64, named=TRUSTED)
    assert result["ok"], result
    assert result["metadata"]["inputs"] == ["obs", "action_mask"]


def test_masks_on_multi_binary_actions_are_refused_in_one_line(tmp_path, monkeypatch):
    from tests.envs import space_envs

    monkeypatch.setattr(space_envs.MultiBinaryAction, "action_masks",
                        lambda self: np.ones(3, dtype=bool), raising=False)
    with pytest.raises(UserError, match="masks work with Discrete and MultiDiscrete actions, "
                                        "not MultiBinary"):
        Runner(compose_train_config(overrides("MultiBinaryAction", "ppo")), tmp_path)
