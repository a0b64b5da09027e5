"""A run's `latest.pt` with 200 flipped bytes in a tensor's data (which `torch.load` reads
without complaint) is refused by `rltrain eval`, `export` and `resume=` in one line saying what
to use instead: the run's `final.pt` or `best.pt` to evaluate or export, another of its
checkpoints to resume from (and that resume works)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import torch

from rltrain.checkpoint import format as checkpoint
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli
from tests.test_checkpoint_checksum import flip, record

TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[64]", "total_timesteps=64", "checkpoint.freq=32",
        "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off"]
DAMAGED = ("rltrain: error: {run}/checkpoints/latest.pt is damaged (its checksum does not match "
           "its contents): ")
COMMANDS = {"eval": ["eval", "ckpt={run}/checkpoints/latest.pt", "episodes=1"],
            "export": ["export", "ckpt={run}/checkpoints/latest.pt", "format=torchscript"],
            "resume": ["resume={run}", "total_timesteps=128"]}


def refusal(command: str, run: str, tmp_path, monkeypatch, capfd) -> str:
    """The one line `command` of the run in `run` is refused with (exit code 2)."""
    result = run_cli([a.format(run=run) for a in COMMANDS[command]], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE)
    assert result.err.strip().startswith(DAMAGED.format(run=run)), result.describe()
    return result.err.strip()[len(DAMAGED.format(run=run)):]


def test_each_command_refuses_a_latest_pt_with_flipped_tensor_bytes_saying_what_to_use(
        tmp_path, monkeypatch, capfd):
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
    bare = tmp_path / "bare" / "checkpoints"  # the same run with latest.pt alone
    bare.mkdir(parents=True)
    shutil.copy(latest, bare / "latest.pt")
    shutil.copytree(tmp_path / "run" / ".hydra", bare.parent / ".hydra")
    for command in ("eval", "export"):
        assert refusal(command, "run", tmp_path, monkeypatch, capfd) == (
            "use run/checkpoints/final.pt or run/checkpoints/best.pt of the run, or another "
            "checkpoint")
        assert refusal(command, "bare", tmp_path, monkeypatch, capfd) == (
            "use another checkpoint (the run has no final.pt or best.pt beside it)")
    assert refusal("resume", "bare", tmp_path, monkeypatch, capfd) == (
        "the run has no other checkpoint to resume from; train it again into another "
        "hydra.run.dir")
    assert refusal("resume", "run", tmp_path, monkeypatch, capfd) == (
        "resume from another of its checkpoints instead (training goes on from that "
        "checkpoint's step): resume=run/checkpoints/final.pt or "
        "resume=run/checkpoints/step_000000064.pt")
    assert not (tmp_path / "run" / "eval").exists() and not (tmp_path / "run" / "export").exists()
    # the advice holds: the run resumes from its final.pt and completes the longer budget
    resumed = run_cli(["resume=run/checkpoints/final.pt", "total_timesteps=128"], tmp_path,
                      monkeypatch, capfd)
    assert resumed.rc == 0, resumed.describe()
    assert checkpoint.load(latest)["counters"]["global_step"] == 128


def storage_of(path: Path, tensor: torch.Tensor) -> str:
    """The name of the `data/<n>` record of checkpoint `path` that holds `tensor`'s bytes."""
    with zipfile.ZipFile(path) as z:
        return next(i.filename for i in z.infolist()
                    if "/data/" in i.filename and z.read(i) == tensor.numpy().tobytes())
