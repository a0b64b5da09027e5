"""Invalid-action masks: honoured in sampling, the mode, log-probabilities, entropies, DQN's
greedy and random actions and its TD target, stored by both buffers, and end to end a strict env
(which raises on an invalid action) trains and evaluates with PPO, A2C and DQN under both
conventions (`action_masks()` and `info["action_mask"]`)."""

from __future__ import annotations

import math

import pytest
import torch

from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.dqn import DQN, greedy_next_value
from rltrain.buffers.replay import ReplayBuffer
from rltrain.buffers.rollout import RolloutBuffer
from rltrain.config.compose import compose_train_config
from rltrain.errors import EnvError
from rltrain.nets.heads import CategoricalDist
from rltrain.runner.runner import Runner
from rltrain.types import EnvSpec

MASK = torch.tensor([[True, False, True, False], [False, False, False, True]])
LOGITS = torch.tensor([[0.0, 5.0, 1.0, 9.0], [3.0, 2.0, 1.0, 0.0]])  # invalid ones highest


def test_masked_categorical_never_samples_or_prefers_an_invalid_action():
    torch.manual_seed(0)
    dist = CategoricalDist(LOGITS.repeat(500, 1), MASK.repeat(500, 1))
    samples = dist.sample().view(500, 2)
    assert MASK[0, samples[:, 0]].all() and (samples[:, 1] == 3).all()
    assert dist.mode()[:2].tolist() == [2, 3]


def test_masked_log_prob_and_entropy_cover_the_valid_actions_only():
    dist = CategoricalDist(LOGITS, MASK)
    p0 = torch.softmax(torch.tensor([0.0, 1.0]), 0)  # row 0: actions 0 and 2
    assert dist.log_prob(torch.tensor([2, 3])).tolist() == pytest.approx([math.log(p0[1]), 0.0])
    expected = [-(p0 * p0.log()).sum().item(), 0.0]
    assert dist.entropy().tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.isfinite(dist.entropy()).all()


SPEC = EnvSpec(obs_shape=(3,), action_kind="discrete", action_dim=4, num_envs=2)


def test_dqn_acts_greedily_and_randomly_among_valid_actions_only():
    torch.manual_seed(0)
    dqn = DQN(DQNConfig(hidden_sizes=[8], exploration_initial_eps=1.0,
                        exploration_final_eps=1.0), SPEC)
    obs = torch.randn(2, 3)
    actions = torch.stack([dqn.act(obs, 0, action_mask=MASK) for _ in range(300)])
    assert MASK[0, actions[:, 0]].all() and (actions[:, 1] == 3).all()
    assert set(actions[:, 0].tolist()) == {0, 2}  # random exploration reaches both valid ones
    greedy = DQN(DQNConfig(hidden_sizes=[8], exploration_initial_eps=0.0,
                           exploration_final_eps=0.0), SPEC)
    assert MASK.gather(1, greedy.act(obs, 0, action_mask=MASK).unsqueeze(1)).all()
    assert MASK.gather(1, greedy.policy.act(obs, action_mask=MASK).unsqueeze(1)).all()


@pytest.mark.parametrize("double_q", [False, True])
def test_td_target_maximises_over_the_valid_next_actions(double_q):
    q = LOGITS  # online and target alike: the valid maxima are 1.0 (action 2) and 0.0 (action 3)
    assert greedy_next_value(q, q, double_q, MASK).tolist() == [1.0, 0.0]
    assert greedy_next_value(q, q, double_q).tolist() == [9.0, 3.0]


def test_rollout_buffer_hands_the_masks_to_the_update_batch():
    buf = RolloutBuffer(2, 2, (3,), (), torch.long, torch.device("cpu"))
    for t in range(2):
        buf.add(torch.zeros(2, 3), torch.tensor([0, 3]), torch.zeros(2), torch.zeros(2),
                torch.zeros(2), torch.zeros(2, dtype=torch.bool),
                torch.zeros(2, dtype=torch.bool), MASK if t == 0 else ~MASK)
    batch = buf.finish(torch.zeros(2), 0.99, 0.95)
    assert torch.equal(batch.action_masks, torch.cat([MASK, ~MASK]))


def test_replay_stores_samples_and_restores_next_state_masks():
    replay = ReplayBuffer(4, (2,), (), torch.long, torch.device("cpu"))
    for t in range(3):  # 6 rows into 4 slots: wraps around
        obs = torch.tensor([[t, 0.0], [t, 1.0]])  # (step, env row)
        replay.add(obs, torch.tensor([t, t]), torch.zeros(2), torch.zeros(2, 2), torch.zeros(2),
                   next_mask=MASK if t != 1 else ~MASK)
    batch = replay.sample(64)
    for (t, row), mask in zip(batch.obs.long().tolist(), batch.next_action_masks, strict=True):
        assert t in (1, 2)
        assert torch.equal(mask, (MASK if t != 1 else ~MASK)[row])
    restored = ReplayBuffer(4, (2,), (), torch.long, torch.device("cpu"))
    restored.load_state_dict(replay.state_dict())
    assert torch.equal(restored.next_masks, replay.next_masks)


def run_on(env_class: str, algo: str, tmp_path, steps: int = 320, **extra: str):
    overrides = [f"algo={algo}", f"env.id=tests.envs.masked_envs:{env_class}", "env.num_envs=2",
                 f"total_timesteps={steps}", "algo.hidden_sizes=[16]", "eval.episodes=4",
                 "eval.num_envs=2", "logger=none", "progress=off", "checkpoint.freq=0",
                 *(f"{k}={v}" for k, v in extra.items())]
    if algo == "ppo":
        overrides += ["algo.n_steps=32", "algo.batch_size=32"]
    if algo == "dqn":
        overrides += ["algo.learning_starts=64", "algo.batch_size=16",
                      "checkpoint.save_buffer=true"]
    return Runner(compose_train_config(overrides), tmp_path).run()


@pytest.mark.parametrize("env_class", ["PickTarget", "PickTargetInfo"])
@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
def test_a_strict_masked_env_trains_and_evaluates_without_an_invalid_action(algo, env_class,
                                                                             tmp_path):
    result = run_on(env_class, algo, tmp_path)  # the env raises on any invalid action
    assert result["episodes"] == 4


def test_the_strict_env_does_catch_an_agent_that_ignores_the_mask(tmp_path, monkeypatch):
    import rltrain.runner.on_policy as loop

    monkeypatch.setattr(loop, "action_mask", lambda env: None)
    with pytest.raises(EnvError, match="InvalidAction"):
        run_on("PickTarget", "ppo", tmp_path)


@pytest.mark.parametrize("bad, message", [
    ("[true, false]", "one bool per action"),
    ("[false, false, false, false, false, false, false, false]", "allows no action in row"),
])
def test_a_malformed_mask_is_one_line_naming_the_env(bad, message, tmp_path, monkeypatch):
    from tests.envs import masked_envs

    mask = torch.tensor(eval(bad.replace("true", "True").replace("false", "False")))
    monkeypatch.setattr(masked_envs.PickTarget, "action_masks", lambda self: mask.numpy())
    with pytest.raises(EnvError, match=message):
        run_on("PickTarget", "ppo", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_masked_agents_learn_faster_than_unmasked_ones(algo, tmp_path, monkeypatch):
    """PickTarget with 16 actions, 2 valid: after the same short budget the masked agent scores
    higher than one that never sees the mask (the env, non-strict, pays 0 for invalid ones).
    Measured 2026-11-24, seed 0: PPO 1,024 steps 10.0 vs 8.35; DQN 1,000 steps 9.95 vs 2.05
    (at 2,000: 10.0 vs 9.35 and 10.0 vs 5.3; at 4,000 both PPO agents score 10)."""
    import rltrain.runner.off_policy as off_loop
    import rltrain.runner.on_policy as on_loop

    def score(masked: bool, folder: str) -> float:
        with monkeypatch.context() as m:
            if not masked:
                for module in (on_loop, off_loop):
                    m.setattr(module, "action_mask", lambda env: None)
                m.setattr("rltrain.evaluation.episodes.action_mask", lambda env: None)
            cfg = compose_train_config([
                f"algo={algo}", "env.id=tests.envs.masked_envs:PickTarget",
                "+env.kwargs.n=16", "+env.kwargs.strict=false", "env.num_envs=4", "seed=0",
                "algo.hidden_sizes=[32]", "eval.episodes=20", "eval.num_envs=4", "eval.freq=0",
                "logger=none", "progress=off", "checkpoint.freq=0",
                *(["total_timesteps=1024", "algo.n_steps=64", "algo.batch_size=64"]
                  if algo == "ppo" else ["total_timesteps=1000", "algo.learning_starts=200",
                                         "algo.exploration_steps=500"])])
            return Runner(cfg, tmp_path / folder).run()["mean_reward"]

    masked, unmasked = score(True, "masked"), score(False, "unmasked")
    assert masked >= 9.5 and masked >= unmasked + 1.0, (masked, unmasked)


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_masked_policy_exports_with_the_mask_as_an_input(algo, fmt, tmp_path):
    from rltrain.envs.trust import NamedCode
    from rltrain.export.command import export_policy
    from rltrain.export.formats import load, read_metadata

    run_on("PickTarget", algo, tmp_path, steps=128)
    named = NamedCode(frozenset({"tests.envs.masked_envs"}))  # as env.import= on the command line
    result = export_policy(tmp_path, fmt, check_samples=64, named=named)
    assert result["ok"], result
    path = tmp_path / "export" / result["path"].split("/")[-1]
    assert read_metadata(fmt, path)["inputs"] == ["obs", "action_mask"]
    obs = torch.eye(8).numpy()
    only = torch.zeros(8, 8, dtype=torch.bool)
    only[torch.arange(8), torch.tensor([3, 1, 4, 1, 5, 0, 2, 6])] = True  # one valid action each
    assert load(fmt, path)(obs, only.numpy()).tolist() == [3, 1, 4, 1, 5, 0, 2, 6]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_no_invalid_action_in_100k_steps(algo, tmp_path):
    """The strict env raises on the first invalid action: finishing is the proof."""
    cfg = compose_train_config([
        f"algo={algo}", "env.id=tests.envs.masked_envs:PickTarget", "+env.kwargs.n=16",
        "env.num_envs=8", "total_timesteps=100000", "algo.hidden_sizes=[32]", "eval.freq=20000",
        "eval.episodes=10", "logger=none", "progress=off", "checkpoint.freq=0"])
    assert Runner(cfg, tmp_path).run()["mean_reward"] == 10.0
