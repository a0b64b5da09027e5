"""`net.*` end to end: training through `rltrain.train` (the CLI's compose path, `net.`
shorthand included), then `rltrain eval` and export rebuilding the same networks from the
checkpoint; PPO and DQN on the built-in pixel env pick the CNN encoder by themselves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from rltrain import train
from rltrain.checkpoint import format as checkpoint
from rltrain.envs.make import make_env
from rltrain.evaluation.agent import build_agent, load_checkpoint
from rltrain.evaluation.command import evaluate
from rltrain.export.command import export_policy

QUIET = ["logger=none", "progress=off", "eval.episodes=2", "eval.num_envs=2", "eval.freq=0",
         "checkpoint.freq=0"]
PIXELS = ["env=pixel_cartpole", "env.num_envs=2", "env.max_episode_steps=30",
          "net.cnn_channels=[4,8,8]", "net.cnn_features=32", "net.hidden=[16]", *QUIET]
TRAINERS = {
    "ppo": ["algo=ppo", "total_timesteps=128", "algo.n_steps=32", "algo.batch_size=32",
            "algo.n_epochs=1"],
    "ppo_shared": ["algo=ppo", "total_timesteps=128", "algo.n_steps=32", "algo.batch_size=32",
                   "algo.n_epochs=1", "net.share_encoder=true"],
    "dqn": ["algo=dqn", "total_timesteps=200", "algo.buffer_size=500", "algo.learning_starts=64",
            "algo.batch_size=16", "algo.train_freq=1", "algo.target_update_interval=50"],
}


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    """Skip the matplotlib learning curve each run draws (0.7 s; not what is tested here)."""
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


def rltrain_eval(run_dir: Path, monkeypatch, capsys) -> dict:
    """`rltrain eval ckpt=<run_dir> episodes=2`, in-process; returns the written results."""
    from rltrain.cli import main

    monkeypatch.setattr(sys, "argv", ["rltrain", "eval", f"ckpt={run_dir}", "episodes=2",
                                      "num_envs=2"])
    main()
    assert "checkpoint:" in capsys.readouterr().out
    return json.loads((run_dir / "eval" / "results.json").read_text())


@pytest.mark.parametrize("algo", sorted(TRAINERS))
def test_pixel_env_trains_with_the_cnn_encoder_and_its_checkpoint_evaluates(
        algo, tmp_path, monkeypatch, capsys):
    result = train([*TRAINERS[algo], *PIXELS], run_dir=tmp_path)
    assert result["episodes"] == 2
    payload = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    net = payload["config"]["algo"]["net"]
    assert (net["cnn_channels"], net["cnn_features"], net["hidden"]) == ([4, 8, 8], 32, [16])
    on_policy = algo.startswith("ppo")
    weights = payload["algo"]["policy" if on_policy else "q_net"]
    conv = weights["actor_encoder.convs.0.weight" if on_policy else "encoder.convs.0.weight"]
    assert conv.shape == (4, 3, 8, 8)  # 3 stacked frames in, 8x8 kernels
    shared = algo == "ppo_shared"
    assert (not any(k.startswith("critic_encoder.") for k in weights)) == (shared or not on_policy)
    evaluated = rltrain_eval(tmp_path, monkeypatch, capsys)
    assert evaluated["algo"] == algo.split("_")[0] and evaluated["episodes"] == 2
    assert all(1 <= n <= 30 for n in evaluated["lengths"])
    exported = export_policy(tmp_path, "torchscript", check_samples=64)
    assert exported["ok"] and exported["obs_shape"] == [40, 40, 3]


def test_net_settings_survive_the_checkpoint_round_trip(tmp_path):
    net = ["net.actor_hidden=[24]", "net.critic_hidden=[40,20]", "net.activation=elu",
           "net.layer_norm=true", "net.ortho_init=false"]
    train(["algo=ppo", "env=CartPole-v1", "env.num_envs=2", "total_timesteps=64",
           "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1", *net, *QUIET],
          run_dir=tmp_path)
    path = tmp_path / "checkpoints" / "latest.pt"
    payload = checkpoint.load(path)
    assert payload["config"]["algo"]["net"] == {
        "hidden": None, "activation": "elu", "actor_hidden": [24], "critic_hidden": [40, 20],
        "layer_norm": True, "ortho_init": False, "encoder": "auto", "cnn_channels": [32, 64, 64],
        "cnn_features": 512, "share_encoder": False, "encoders": {}}
    _, payload, cfg = load_checkpoint(path)
    env = make_env(cfg.env, "cpu", num_envs=1, training=False)
    rebuilt = build_agent(cfg, env, payload, path, "cpu").policy
    env.close()
    saved = payload["algo"]["policy"]
    assert rebuilt.actor_body[0].out_features == 24 and rebuilt.critic[3].out_features == 20
    assert isinstance(rebuilt.actor_body[1], torch.nn.LayerNorm)
    assert isinstance(rebuilt.actor_body[2], torch.nn.ELU)
    for key, value in rebuilt.state_dict().items():
        assert torch.equal(value, saved[key]), key
    assert evaluate(path, episodes=2, num_envs=2, write=False)["episodes"] == 2
