"""RunDir names every file of a run folder in one place."""

from pathlib import Path

import pytest

from rltrain.checkpoint.run_dir import RunDir, periodic_name


def test_names_match_the_documented_layout(tmp_path):
    run = RunDir(tmp_path)
    rel = {name: getattr(run, name).relative_to(tmp_path).as_posix() for name in (
        "hydra", "hydra_config", "hydra_overrides", "resume_overrides", "tb", "metrics_csv", "wandb_run_id", "swanlog", "train_log", "learning_curve",
        "checkpoints", "latest", "best", "final", "eval", "eval_results", "eval_videos",
        "export", "stop_file", "lock", "seeds_summary")}
    assert rel == {
        "hydra": ".hydra", "hydra_config": ".hydra/config.yaml",
        "hydra_overrides": ".hydra/overrides.yaml",
        "resume_overrides": ".hydra/resume/overrides.yaml", "tb": "tb", "metrics_csv": "metrics.csv",
        "wandb_run_id": "wandb/run_id", "swanlog": "swanlog", "train_log": "train.log",
        "learning_curve": "learning_curve.png", "checkpoints": "checkpoints",
        "latest": "checkpoints/latest.pt", "best": "checkpoints/best.pt",
        "final": "checkpoints/final.pt", "eval": "eval", "eval_results": "eval/results.json",
        "eval_videos": "eval/videos", "export": "export", "stop_file": "STOP", "lock": ".lock",
        "seeds_summary": "seeds.json"}


def test_root_is_a_path_even_from_a_string(tmp_path):
    assert RunDir(str(tmp_path)).root == tmp_path
    assert RunDir(str(tmp_path)) == RunDir(tmp_path)


def test_run_dir_is_frozen(tmp_path):
    with pytest.raises(AttributeError):
        RunDir(tmp_path).root = Path("elsewhere")


def test_periodic_name_is_zero_padded_so_names_sort_by_step(tmp_path):
    run = RunDir(tmp_path)
    assert run.periodic(1234).name == "step_000001234.pt" == periodic_name(1234)
    run.checkpoints.mkdir()
    for step in (20000, 3000, 100000):
        run.periodic(step).touch()
    run.latest.touch()
    assert [p.name for p in run.periodic_checkpoints()] == [
        "step_000003000.pt", "step_000020000.pt", "step_000100000.pt"]


def test_seed_folder_is_a_run_dir(tmp_path):
    assert RunDir(tmp_path).seed(3) == RunDir(tmp_path / "seed_3")


@pytest.mark.parametrize("ckpt, run", [
    ("runs/a/checkpoints/latest.pt", "runs/a"),
    ("runs/a/checkpoints/step_000000100.pt", "runs/a"),
    ("runs/a/model.pt", "runs/a"),
    ("model.pt", "."),
])
def test_of_checkpoint_finds_the_run_folder(ckpt, run):
    assert RunDir.of_checkpoint(ckpt) == RunDir(Path(run))


def test_of_checkpoint_inverts_the_checkpoint_names(tmp_path):
    run = RunDir(tmp_path / "run")
    for ckpt in (run.latest, run.best, run.final, run.periodic(5)):
        assert RunDir.of_checkpoint(ckpt) == run


def test_probes_look_at_the_disk(tmp_path):
    run = RunDir(tmp_path)
    assert not run.is_hydra_run() and not run.has_checkpoint()
    run.hydra.mkdir()
    run.checkpoints.mkdir()
    assert run.is_hydra_run() and not run.has_checkpoint()
    run.final.touch()
    assert run.has_checkpoint()
