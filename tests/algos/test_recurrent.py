"""Recurrent PPO: sequence minibatches compute what step-by-step acting computed, the state is
zeroed exactly at episode starts, resume is exact, masks and gSDE compose with it, and a memory
task that a feed-forward policy cannot solve is learned."""

from __future__ import annotations

import pytest
import torch

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.ppo import PPO
from rltrain.buffers.sequences import sequence_length, sequence_minibatches
from rltrain.config.compose import compose_train_config
from rltrain.errors import UserError
from rltrain.runner.runner import Runner
from rltrain.types import EnvSpec

SPEC = EnvSpec(obs_shape=(3,), action_kind="discrete", action_dim=2, num_envs=3)


def rollout(ppo: PPO, steps: int, seed: int = 0):
    """Act `steps` times on random observations with episode starts sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(steps, SPEC.num_envs, 3, generator=g)
    starts = torch.rand(steps, SPEC.num_envs, generator=g) < 0.25
    starts[0] = True
    logps, values, actions = [], [], []
    for t in range(steps):
        a, lp, v = ppo.act(obs[t], episode_starts=starts[t])
        actions.append(a)
        logps.append(lp)
        values.append(v)
    return obs, starts, torch.stack(actions), torch.stack(logps), torch.stack(values)


@pytest.mark.parametrize("kind, shared, bptt", [("lstm", False, 0), ("gru", True, 4),
                                                ("lstm", True, 2)])
def test_sequence_minibatches_reproduce_the_step_by_step_log_probs_and_values(kind, shared, bptt):
    torch.manual_seed(0)
    ppo = PPO(PPOConfig(recurrent=kind, shared_recurrent=shared, recurrent_hidden_size=8,
                        recurrent_layers=2, hidden_sizes=[8], n_steps=8, batch_size=8,
                        bptt_len=bptt), SPEC)
    obs, starts, actions, logps, values = rollout(ppo, 8)
    states, rec_starts = ppo.memory.take()
    assert torch.equal(rec_starts, starts)
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731  # rows t * N + n
    seen = torch.zeros(8 * SPEC.num_envs, dtype=torch.long)
    for seq in sequence_minibatches(states, rec_starts, sequence_length(8, bptt), 8):
        dist, v = ppo._forward(flat(obs)[seq.rows], None, seq)
        lp = ppo.policy.head.log_prob(dist, flat(actions)[seq.rows])
        assert torch.allclose(lp, flat(logps)[seq.rows], atol=1e-6)
        assert torch.allclose(v, flat(values)[seq.rows], atol=1e-6)
        seen[seq.rows] += 1
    assert (seen == 1).all(), "every row in exactly one sequence"


def test_the_state_is_zeroed_exactly_where_an_episode_starts():
    torch.manual_seed(0)
    policy = PPO(PPOConfig(recurrent="lstm", recurrent_hidden_size=8, hidden_sizes=[8]), SPEC).policy
    obs = torch.randn(6, 3, 3)
    starts = torch.zeros(6, 3, dtype=torch.bool)
    starts[0] = True
    starts[3, 1] = True  # env 1 starts a new episode at step 3
    full, _, _ = policy.sequence(obs, policy.initial_state(3), starts)
    first = torch.zeros(3, 3, dtype=torch.bool)
    first[0] = True
    fresh, _, _ = policy.sequence(obs[3:], policy.initial_state(3), first)
    assert torch.allclose(full[3:, 1], fresh[:, 1], atol=1e-6)  # env 1 forgot its past
    assert not torch.allclose(full[3:, 0], fresh[:, 0])  # env 0 remembers


def tiny(extra: tuple[str, ...], steps: int = 96) -> object:
    return compose_train_config([
        "algo=ppo_lstm", "env.num_envs=2", "env.max_episode_steps=30", "algo.hidden_sizes=[16]",
        "algo.recurrent_hidden_size=8", "algo.n_steps=16", "algo.batch_size=16",
        "algo.n_epochs=2", "algo.bptt_len=0", f"total_timesteps={steps}", "eval.freq=0", "eval.episodes=2",
        "eval.num_envs=2", f"checkpoint.freq={steps // 2}", "logger=none", "progress=off",
        *extra])


def final_algo(run_dir):
    from rltrain.checkpoint import format as checkpoint

    return checkpoint.load(run_dir / "checkpoints" / "final.pt")["algo"]


def same_tree(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tree(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("extra", [("env=CartPoleNoVel-v1",),
                                   ("env=PendulumNoVel-v1", "algo.recurrent=gru",
                                    "algo.use_sde=true", "algo.bptt_len=8")],
                         ids=["lstm-cartpole", "gru-gsde-pendulum"])
def test_recurrent_runs_resume_exactly_and_evaluate(extra, tmp_path):
    from rltrain.checkpoint import format as checkpoint
    from rltrain.config.validation import to_train_config

    result = Runner(tiny(extra), tmp_path / "a").run()
    assert result["episodes"] == 2
    straight = final_algo(tmp_path / "a")
    assert straight["rnn_state"].abs().sum() > 0
    half = checkpoint.load(sorted((tmp_path / "a" / "checkpoints").glob("step_*.pt"))[0])
    Runner(to_train_config(half["config"]), tmp_path / "r", resume_from=half).run()
    assert same_tree(straight, final_algo(tmp_path / "r")), "resumed run ended elsewhere"


def test_masks_compose_with_recurrence(tmp_path):
    cfg = tiny(("env.id=tests.envs.masked_envs:PickTarget",), steps=64)
    assert Runner(cfg, tmp_path).run()["episodes"] == 2  # the strict env raises on invalid ones


@pytest.mark.parametrize("override, message", [
    ("algo.recurrent=rnn", "choose none, lstm or gru"),
    ("algo.bptt_len=5", "must divide algo.n_steps=16"),
    ("algo.recurrent_layers=0", "algo.recurrent_layers=0 must be > 0"),
    ("algo.batch_size=4", "algo.bptt_len=0 gives sequences of 4 steps, the gcd of "
                          "algo.n_steps=16 and algo.batch_size=4: too short for memory"),
    ("net.share_encoder=true", "already has one encoder"),
])
def test_bad_recurrent_settings_are_one_line(override, message, tmp_path):
    with pytest.raises(UserError, match=message):
        Runner(tiny(("env=CartPoleNoVel-v1", override)), tmp_path)


def train_on_cue(algo: str, tmp_path) -> float:
    """Mean eval return on `Cue` after 6k steps (1: always right; 0.5: chance)."""
    memory = ["algo.recurrent_hidden_size=16"] if algo == "ppo_lstm" else []
    cfg = compose_train_config([
        f"algo={algo}", "env.id=tests.envs.memory_envs:Cue", "env.num_envs=8", "seed=0",
        "total_timesteps=6000", "algo.n_steps=24", "algo.batch_size=96", "algo.lr=3e-3",
        "algo.hidden_sizes=[16]", "algo.n_epochs=4", "eval.freq=0", "eval.episodes=20",
        "eval.num_envs=4", "checkpoint.freq=0", "logger=none", "progress=off", *memory])
    return Runner(cfg, tmp_path).run()["mean_reward"]


def test_a_recurrent_policy_remembers_the_cue_and_a_feed_forward_one_cannot(tmp_path):
    assert train_on_cue("ppo_lstm", tmp_path / "lstm") >= 0.95
    assert train_on_cue("ppo", tmp_path / "ff") <= 0.8  # it cannot beat chance (0.5) by much


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_a_recurrent_export_takes_and_returns_the_state_and_matches_torch(fmt, tmp_path):
    from rltrain.export.command import export_policy
    from rltrain.export.formats import load, read_metadata

    Runner(tiny(("env=PendulumNoVel-v1", "env.normalize_obs=true"), steps=64), tmp_path).run()
    result = export_policy(tmp_path, fmt, check_samples=64)
    assert result["ok"], result  # actions and next states both checked
    path = tmp_path / "export" / result["path"].split("/")[-1]
    layers, batch, width = read_metadata(fmt, path)["recurrent"]["state_shape"]
    assert (layers, batch, width) == (1, "batch", 32)  # LSTM h and c of 8, actor and critic
    run = load(fmt, path)
    obs = torch.randn(5, 3).numpy()
    zero = torch.zeros(layers, 5, width).numpy()
    first, state = run(obs, zero)
    second, _ = run(obs, state)
    assert first.shape == (5, 1) and state.shape == zero.shape
    assert not (first == second).all(), "the state carried nothing"


@pytest.mark.parametrize("shared", [False, True])
def test_a_sequence_with_starts_inside_ends_in_the_state_step_by_step_acting_reaches(shared):
    torch.manual_seed(1)
    policy = PPO(PPOConfig(recurrent="lstm", recurrent_hidden_size=8, hidden_sizes=[8],
                           shared_recurrent=shared), SPEC).policy
    obs = torch.randn(7, 3, 3)
    starts = torch.rand(7, 3) < 0.3
    starts[2, 0] = True  # at least one start inside: the sequence is cut there
    state0 = torch.randn(policy.initial_state(3).shape)
    actor, critic, final = policy.sequence(obs, state0, starts)
    state, outs = state0, []
    for t in range(7):
        a, c, state = policy.step(obs[t], state, starts[t])
        outs.append((a, c))
    assert torch.allclose(final, state, atol=1e-6)
    assert torch.allclose(actor, torch.stack([a for a, _ in outs]), atol=1e-6)
    assert torch.allclose(critic, torch.stack([c for _, c in outs]), atol=1e-6)


def test_ppo_lstm_without_a_preset_has_defaults_that_fit_together(tmp_path):
    cfg = compose_train_config(["algo=ppo_lstm", "env=Acrobot-v1", "logger=none"])
    assert (cfg.algo.recurrent, cfg.algo.n_steps, cfg.algo.batch_size) == ("lstm", 128, 128)
    Runner(cfg, tmp_path)  # builds: the rollout tiles into whole-sequence minibatches


def test_a_damaged_saved_recurrent_state_is_refused_in_one_line(tmp_path):
    from rltrain.errors import UserError as Refused
    from rltrain.evaluation.agent import load_algo

    ppo = PPO(PPOConfig(recurrent="gru", recurrent_hidden_size=8, hidden_sizes=[8]), SPEC)
    state = ppo.state_dict()
    state["rnn_state"] = torch.zeros(1, 3, 5)
    with pytest.raises(Refused, match="saved recurrent state"):
        load_algo(ppo, state, tmp_path / "x.pt")
    state["rnn_state"] = torch.ones(1, 7, 16)  # another env count: not this run's, zeros kept
    load_algo(ppo, state, tmp_path / "x.pt")
    assert not ppo.rnn_state.any()


@pytest.mark.parametrize("n_steps, batch_size, bptt_len, expected", [
    (2048, 64, 0, 64),    # PPO's defaults with a core: minibatches shorter than the rollout
    (128, 128, 0, 128),   # ppo_lstm: one whole rollout per sequence, as before
    (16, 48, 0, 16),      # minibatches of three whole rollouts
    (24, 36, 0, 12),
    (64, 768, 32, 32),    # bptt_len set: kept
])
def test_bptt_len_zero_picks_the_longest_sequence_that_tiles_rollout_and_minibatch(
        n_steps, batch_size, bptt_len, expected):
    cfg = compose_train_config(["algo=ppo", "algo.recurrent=gru", f"algo.n_steps={n_steps}",
                                f"algo.batch_size={batch_size}", f"algo.bptt_len={bptt_len}",
                                "env.num_envs=12"])
    assert cfg.algo.sequence_len() == expected


def test_readme_recurrent_command_runs_with_ppo_defaults(tmp_path, caplog, monkeypatch):
    """README: `rltrain algo=ppo algo.recurrent=gru env=pendulum_novel ...`, no preset: PPO's
    n_steps 2048 and batch_size 64 train on 64-step sequences, and the start lines say so."""
    from rltrain.algos import ppo

    lengths = []
    cut = ppo.sequence_minibatches
    monkeypatch.setattr(ppo, "sequence_minibatches",
                        lambda states, starts, seq_len, batch: lengths.append(seq_len)
                        or cut(states, starts, seq_len, batch))
    cfg = compose_train_config(["algo=ppo", "algo.recurrent=gru", "env=pendulum_novel",
                                "algo.recurrent_hidden_size=32", "total_timesteps=1024",
                                "algo.n_epochs=2", "eval.episodes=1", "logger=none",
                                "progress=off"])
    assert cfg.preset is None and (cfg.algo.n_steps, cfg.algo.batch_size) == (2048, 64)
    with caplog.at_level("INFO", logger="rltrain"):
        Runner(cfg, tmp_path).run()
    assert "recurrent gru core (32 units): trains on sequences of 64 steps" in caplog.text
    assert lengths == [64, 64]  # one cut an epoch: 8 envs x a 128-step (shortened) rollout
