"""Every checkpoint loads again, for every env family; resume says how exact it is (issue 20).

For each family (classic control, native torch, pixels, Box2D, MuJoCo, a user env with numpy
state of every dtype) a run's `latest.pt` is evaluated, exported to TorchScript and resumed.
Envs rltrain can capture whole resume bit for bit; the others restart their episodes, say so,
and keep no counter of an episode whose simulator state is gone.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.payload import RESUME
from rltrain.envs.normalize import NormalizeObs, ScaleReward
from rltrain.envs.trust import named_code
from rltrain.evaluation.command import evaluate
from rltrain.export.command import export_policy
from rltrain.nets.config import NetConfig
from rltrain.runner.runner import Runner
from tests.envs import state_envs
from tests.runner.test_resume import assert_same_run, stop_at, train_with_a_stop

PIXELS = "rltrain.envs.pixels:PixelCartPole"
FAMILIES = {
    "classic": ({"id": "CartPole-v1"}, None),
    "native": ({"id": "CartPole-v1", "backend": "torch"}, None),
    "pixels": ({"id": PIXELS, "kwargs": {"frames": 2}}, None),
    "box2d": ({"id": "LunarLander-v3"}, "Box2D"),
    "mujoco": ({"id": "InvertedPendulum-v5"}, "mujoco"),
    "user_numpy_state": ({"id": state_envs.DRIFT_ID}, None),
}


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    """User envs registered; no learning-curve PNG per run (0.7 s, not what is tested here)."""
    state_envs.register()
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


def family_cfg(tiny_cfg, env: dict, **changes):
    """PPO, 2 envs x 16 steps per iteration, 160 steps, normalized observations and rewards."""
    algo = {"n_epochs": 1, "hidden_sizes": [16]}
    if env["id"] == PIXELS:  # a small CNN: the Nature-DQN sizes take seconds per update
        algo["net"] = NetConfig(cnn_channels=[4, 8, 8], cnn_features=16)
    image = env["id"] == PIXELS
    env = {"max_episode_steps": 40, "normalize_obs": not image, "normalize_reward": True, **env}
    return tiny_cfg(algo=algo, env=env, total_timesteps=160, **changes)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_latest_checkpoint_of_every_env_family_evaluates_exports_and_resumes(family, tiny_cfg,
                                                                             tmp_path):
    env, extra = FAMILIES[family]
    if extra:
        pytest.importorskip(extra)
    cfg = family_cfg(tiny_cfg, env)
    run = tmp_path / "run"
    Runner(cfg, run, callbacks={"post_iteration": [stop_at(96)]}).run()
    latest = run / "checkpoints" / "latest.pt"
    named = named_code([f"env.id={env['id']}"])  # user code is named, as on a command line
    result = evaluate(latest, episodes=2, num_envs=1, write=False, named=named)
    assert result["episodes"] == 2 and result["global_step"] == 96
    exported = export_policy(latest, "torchscript", out=tmp_path / "policy.pt", check_samples=64,
                             named=named)
    assert exported["ok"], exported
    Runner(cfg, run, resume_from=checkpoint.load(latest, require=RESUME)).run()
    final = checkpoint.load(run / "checkpoints" / "final.pt", require=RESUME)
    assert final["counters"]["global_step"] == 160


# ---- exact where the whole env state is captured ----------------------------------------------

@pytest.mark.parametrize("env_id", ["MountainCar-v0", state_envs.DRIFT_ID])
def test_a_captured_env_resumes_bit_for_bit(env_id, tiny_cfg, tmp_path, caplog):
    # MountainCar keeps its state as a tuple of numpy floats, which rltrain 0.1 left out while
    # calling the resume exact; Drift's state is numpy values of every dtype (state protocol)
    cfg = family_cfg(tiny_cfg, {"id": env_id, "max_episode_steps": 30}, eval={"freq": 64},
                     logger={"csv": True, "log_freq": 0})
    with caplog.at_level(logging.INFO, logger="rltrain"):
        train_with_a_stop(cfg, tmp_path / "stopped", 96)  # mid-episode, between evaluations
    assert "resumed at step 96 exactly" in caplog.text
    Runner(cfg, tmp_path / "straight").run()
    assert_same_run(tmp_path / "straight", tmp_path / "stopped")


# ---- the others restart their episodes, and say so --------------------------------------------

def gym_layers(runner):
    """(TimeLimit step counters of every sub-env, the GymVecEnv adapter, ScaleReward)."""
    scale = runner.env
    assert isinstance(scale, ScaleReward) and isinstance(scale.env, NormalizeObs)
    adapter = scale.env.env
    return [e._elapsed_steps for e in adapter.venv.envs], adapter, scale


@pytest.mark.parametrize(("env_id", "module"), [("LunarLander-v3", "Box2D"),
                                                 ("InvertedPendulum-v5", "mujoco"),
                                                 ("Hopper-v5", "mujoco"),
                                                 (state_envs.OPAQUE_ID, None)])
def test_an_env_without_saved_state_restarts_its_episodes_and_says_so(env_id, module, tiny_cfg,
                                                                     tmp_path, caplog):
    if module:
        pytest.importorskip(module)
    cfg = family_cfg(tiny_cfg, {"id": env_id})
    run, mid_episode = tmp_path / "run", {}
    runner = Runner(cfg, run)

    def stop_mid_episode(state):  # the counters the old snapshot would have carried over
        steps, adapter, scale = gym_layers(runner)
        mid_episode.update(steps=steps, returns=adapter.episode_return.copy(),
                           scaled=scale.running_return.clone())
        state.stop = state.global_step >= 64 and any(steps)
    runner.add_callback("post_iteration", stop_mid_episode)
    runner.run()
    assert any(mid_episode["steps"]) and mid_episode["returns"].any()
    saved = checkpoint.load(run / "checkpoints" / "latest.pt", require=RESUME)
    assert not {"sim", "episode_return", "episode_length", "running_return"} & set(saved["env"])
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        resumed = Runner(cfg, run, resume_from=saved)
    step = saved["counters"]["global_step"]
    assert (f"{env_id}: simulator state is not saved (" in caplog.text
            and f"episodes restart on resume (at step {step:,})" in caplog.text)
    steps, adapter, scale = gym_layers(resumed)
    assert steps == [0, 0] and not adapter.episode_return.any() and not adapter.episode_length.any()
    assert not scale.running_return.any()  # no running return of an unfinished episode
    assert not torch.equal(resumed.ctx.obs, saved["loop"]["obs"])
    assert scale.rms.count == saved["env"]["ret_rms"]["count"]  # statistics: restored
    obs_rms = scale.env.rms  # restored, then updated with the fresh reset's 2 observations
    assert obs_rms.count == pytest.approx(saved["env"]["obs_rms"]["count"] + 2)
    resumed.run()
    final = checkpoint.load(run / "checkpoints" / "final.pt")
    assert final["counters"]["global_step"] == 160 and np.isfinite(final["counters"]["best_eval"])
