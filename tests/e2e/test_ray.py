"""A two-job sweep through Hydra's Ray launcher on a local Ray instance (`make test-ray`, which
installs `rltrain[ray]` into its own venv; skipped where the plugin is not installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason='needs "rltrain[ray]" (make test-ray)')

ROOT = Path(__file__).resolve().parents[2]


def test_a_two_job_sweep_runs_on_a_local_ray_instance(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, "-m", "rltrain", "-m", "hydra/launcher=ray",
         "+hydra.launcher.ray.init.num_cpus=2", "+hydra.launcher.ray.init.include_dashboard=false",
         "seed=0,1", "algo=ppo", "env=CartPole-v1", "env.num_envs=2", "total_timesteps=256",
         "algo.n_steps=32", "algo.batch_size=32", "eval.episodes=2", "logger=none",
         "progress=off", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    finished = sorted(p.parent.parent.name for p in (tmp_path / "sweep").glob("*/checkpoints/final.pt"))
    assert finished == ["0", "1"], (finished, done.stderr[-2000:])
