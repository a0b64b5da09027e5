"""DQN on ALE/Breakout-v5 end to end: the frame-deduplicating replay holds uint8 frames, the
run trains and evaluates, a checkpoint with its buffer resumes, and the export carries the
Atari preprocessing contract."""

from __future__ import annotations

import pytest
import torch

from rltrain.api import train
from rltrain.buffers.frame_replay import FrameReplayBuffer
from rltrain.checkpoint import format as checkpoint
from rltrain.config.compose import compose_train_config

pytest.importorskip("ale_py")

RUN = ["algo=dqn", "env.id=ALE/Breakout-v5", "tuned=dqn_atari", "algo.buffer_size=5000",
       "algo.learning_starts=200", "eval.freq=0", "eval.episodes=1", "eval.num_envs=1",
       "checkpoint.freq=0", "logger=none", "progress=off", "env.max_episode_steps=100",
       "checkpoint.save_buffer=true",
       "net.cnn_channels=[8,16,16]", "net.cnn_features=64"]  # a smaller CNN: fast on CPU


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


def test_dqn_on_breakout_uses_the_frame_replay_and_resumes_with_it(tmp_path, monkeypatch):
    import rltrain.runner.setup as setup

    made: list = []
    make_replay = setup.make_replay
    monkeypatch.setattr(setup, "make_replay", lambda *a, **k: made.append(make_replay(*a, **k))
                        or made[-1])
    cfg = compose_train_config([*RUN, "total_timesteps=400"])
    result = train(cfg, run_dir=tmp_path)
    replay = made[0]
    assert isinstance(replay, FrameReplayBuffer) and replay.frames.dtype == torch.uint8
    assert replay.obs_shape == (4, 84, 84) and replay.size > 350
    batch = replay.sample(32)
    assert batch.obs.dtype == batch.next_obs.dtype == torch.uint8
    assert batch.obs.shape == (32, 4, 84, 84)
    assert result["episodes"] == 1
    path = tmp_path / "checkpoints" / "latest.pt"
    saved = checkpoint.load(path)
    assert saved["replay"]["frames"].dtype == torch.uint8
    assert saved["loop"]["obs"].dtype == torch.uint8

    again = [a for a in RUN if not a.startswith("tuned=")]  # a resume applies no preset
    train([*again, "total_timesteps=440", f"resume={path}"], run_dir=tmp_path / "resumed")
    resumed = made[1]
    assert isinstance(resumed, FrameReplayBuffer)
    assert resumed.size >= replay.size  # restored, then grown


def test_breakout_export_takes_uint8_stacks_and_carries_the_preprocessing(tmp_path):
    from rltrain.export.command import export_policy
    from rltrain.export.formats import read_metadata

    train(compose_train_config([*RUN, "total_timesteps=64", "algo.learning_starts=32",
                                "checkpoint.save_buffer=false"]), run_dir=tmp_path)
    result = export_policy(tmp_path, "torchscript", check_samples=16)
    assert result["ok"] and result["obs_shape"] == [4, 84, 84] and result["obs_dtype"] == "uint8"
    meta = read_metadata("torchscript", result["path"])
    assert meta["env_id"] == "ALE/Breakout-v5" and meta["obs_shape"] == [4, 84, 84]
    assert meta["atari"]["frame_stack"] == 4 and meta["atari"]["screen_size"] == 84
    assert meta["atari"]["preprocess"] is True  # what was applied, not the config's "auto"
