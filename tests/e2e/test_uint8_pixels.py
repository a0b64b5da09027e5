"""Pixel observations stay uint8 from the env through the buffers to the network's first
layer (PixelCartPole: uint8 [40, 40, 3]); the network converts them on the device."""

from __future__ import annotations

import pytest
import torch

from rltrain import train
from rltrain.buffers.replay import ReplayBuffer
from rltrain.buffers.rollout import RolloutBuffer
from rltrain.checkpoint import format as checkpoint
from rltrain.envs.make import make_env
from rltrain.evaluation.agent import build_agent, load_checkpoint
from tests.e2e.test_networks import PIXELS, TRAINERS  # the same tiny pixel runs


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


@pytest.mark.parametrize("algo", sorted(TRAINERS))
def test_pixel_runs_keep_uint8_in_their_buffers(algo, tmp_path, monkeypatch):
    seen: dict[str, set] = {"buffer": set(), "added": set(), "sampled": set()}
    rollout_init, rollout_add = RolloutBuffer.__init__, RolloutBuffer.add
    replay_init, replay_add, replay_sample = (ReplayBuffer.__init__, ReplayBuffer.add,
                                              ReplayBuffer.sample)

    def r_init(self, *args, **kwargs):
        rollout_init(self, *args, **kwargs)
        seen["buffer"].add(self.obs.dtype)

    def r_add(self, obs, *args):
        seen["added"].add(obs.dtype)
        rollout_add(self, obs, *args)

    def p_init(self, *args, **kwargs):
        replay_init(self, *args, **kwargs)
        seen["buffer"].add(self.obs.dtype)
        seen["buffer"].add(self.next_obs.dtype)

    def p_add(self, obs, action, reward, next_obs, *args, **kwargs):
        seen["added"] |= {obs.dtype, next_obs.dtype}
        replay_add(self, obs, action, reward, next_obs, *args, **kwargs)

    def p_sample(self, *args, **kwargs):
        batch = replay_sample(self, *args, **kwargs)
        seen["sampled"] |= {batch.obs.dtype, batch.next_obs.dtype}
        return batch

    monkeypatch.setattr(RolloutBuffer, "__init__", r_init)
    monkeypatch.setattr(RolloutBuffer, "add", r_add)
    monkeypatch.setattr(ReplayBuffer, "__init__", p_init)
    monkeypatch.setattr(ReplayBuffer, "add", p_add)
    monkeypatch.setattr(ReplayBuffer, "sample", p_sample)
    result = train([*TRAINERS[algo], *PIXELS], run_dir=tmp_path)
    assert seen["buffer"] == {torch.uint8} and seen["added"] == {torch.uint8}
    if algo == "dqn":
        assert seen["sampled"] == {torch.uint8}
    assert result["episodes"] == 2 and torch.isfinite(torch.tensor(result["mean_reward"]))
    path = tmp_path / "checkpoints" / "latest.pt"
    assert checkpoint.load(path)["loop"]["obs"].dtype == torch.uint8
    # reload: the rebuilt policy takes uint8 (and float) observations, the same actions
    _, payload, cfg = load_checkpoint(path)
    env = make_env(cfg.env, "cpu", num_envs=1, training=False)
    try:
        policy = build_agent(cfg, env, payload, path, "cpu").policy
        obs = torch.randint(0, 256, (8, 40, 40, 3), dtype=torch.uint8)
        with torch.no_grad():
            assert torch.equal(policy.act(obs, deterministic=True),
                               policy.act(obs.float(), deterministic=True))
    finally:
        env.close()
    # resume from the checkpoint continues on uint8 observations
    train([*TRAINERS[algo], *PIXELS, f"resume={path}",
           f"total_timesteps={int(TRAINERS[algo][1].split('=')[1]) + 64}"],
          run_dir=tmp_path / "resumed")
    assert checkpoint.load(tmp_path / "resumed" / "checkpoints" / "latest.pt")["loop"][
        "obs"].dtype == torch.uint8
