"""A run's `latest.pt` with 200 flipped bytes in a tensor's data (which `torch.load` reads
without complaint) is refused by `rltrain eval` and `resume=` in one line naming the run's
`final.pt` and `best.pt`."""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch

from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli
from tests.test_checkpoint_checksum import flip, record

TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[64]", "total_timesteps=64", "eval.freq=0",
        "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off"]


def test_eval_and_resume_refuse_a_latest_pt_with_flipped_tensor_bytes(tmp_path, monkeypatch,
                                                                      capfd):
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)
    made = run_cli([*TINY, "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert made.rc == 0, made.describe()
    latest = tmp_path / "run" / "checkpoints" / "latest.pt"
    raw = torch.load(latest, weights_only=True)
    weights = raw["algo"]["policy"]["actor_body.0.weight"]  # 64 x 4 floats: 1 KiB
    start, size = record(latest, storage_of(latest, weights))
    flip(latest, start + (size - 200) // 2, 200)
    changed = torch.load(latest, weights_only=True)["algo"]["policy"]["actor_body.0.weight"]
    assert not torch.equal(changed, weights)  # torch loads the changed weights silently
    line = ("rltrain: error: run/checkpoints/latest.pt is damaged (its checksum does not match "
            "its contents): use run/checkpoints/final.pt or run/checkpoints/best.pt of the run, "
            "or another checkpoint")
    for argv in (["eval", "ckpt=run/checkpoints/latest.pt", "episodes=1"],
                 ["resume=run", "total_timesteps=128"]):
        result = run_cli(argv, tmp_path, monkeypatch, capfd)
        assert_refused(result, EXIT_USAGE)
        assert result.err.strip() == line, result.describe()
    assert not (tmp_path / "run" / "eval").exists()


def storage_of(path: Path, tensor: torch.Tensor) -> str:
    """The name of the `data/<n>` record of checkpoint `path` that holds `tensor`'s bytes."""
    with zipfile.ZipFile(path) as z:
        return next(i.filename for i in z.infolist()
                    if "/data/" in i.filename and z.read(i) == tensor.numpy().tobytes())
