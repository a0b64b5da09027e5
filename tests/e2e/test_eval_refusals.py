"""`rltrain eval` and `rltrain export` refuse, in one line, what holds no policy they can use
(issue 44): the folder of a seed batch (one run per `seed_<s>/`, no policy of its own) and a
checkpoint whose weights hold NaN."""

from __future__ import annotations

import torch

from rltrain.checkpoint import format as checkpoint
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli

TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[16]", "total_timesteps=64", "eval.freq=0",
        "eval.episodes=2", "logger=none", "progress=off"]


def test_eval_and_export_of_a_seed_batch_folder_name_each_seeds_ckpt(tmp_path, monkeypatch,
                                                                     capfd):
    made = run_cli([*TINY, "num_seeds=2", "hydra.run.dir=batch"], tmp_path, monkeypatch, capfd)
    assert made.rc == 0, made.describe()
    assert (tmp_path / "batch" / "seeds.json").is_file()
    for command in (["eval", "ckpt=batch"], ["export", "ckpt=batch", "format=torchscript"]):
        result = run_cli(command, tmp_path, monkeypatch, capfd)
        assert_refused(result, EXIT_USAGE, "is a batch of 2 seeds")
        assert "ckpt=batch/seed_0 or ckpt=batch/seed_1" in result.err, result.describe()
    one = run_cli(["eval", "ckpt=batch/seed_1", "episodes=2"], tmp_path, monkeypatch, capfd)
    assert one.rc == 0 and (tmp_path / "batch" / "seed_1" / "eval" / "results.json").is_file()


def test_eval_and_export_refuse_a_checkpoint_with_nan_weights_naming_the_parameter(
        tmp_path, monkeypatch, capfd):
    made = run_cli([*TINY, "hydra.run.dir=run"], tmp_path, monkeypatch, capfd)
    assert made.rc == 0, made.describe()
    payload = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    name = "actor_body.0.weight"
    payload["algo"]["policy"][name][0, 0] = float("nan")
    # checkpoint.save refuses non-finite weights (a run never writes them), so the damage comes
    # from outside: the payload as torch.save writes it, still weights-only loadable
    torch.save(payload, tmp_path / "nan.pt")
    for command in (["eval", "ckpt=nan.pt"], ["export", "ckpt=nan.pt", "format=torchscript"]):
        result = run_cli(command, tmp_path, monkeypatch, capfd)
        assert_refused(result, EXIT_USAGE, f"holds NaN in algo.policy.{name}")
    assert not (tmp_path / "export").exists() and not (tmp_path / "eval").exists()
