"""The checkpoint `resume=` names, and the run folder it belongs to."""

from __future__ import annotations

from pathlib import Path

from rltrain.checkpoint import format as checkpoint
from rltrain.run_folder.resume_checkpoint import find_resume_checkpoint, run_dir_of


def test_resume_auto_finds_only_an_unfinished_run(tmp_path):
    assert find_resume_checkpoint("auto", tmp_path) is None  # nothing there yet
    latest = checkpoint.save({"config": {}}, tmp_path / "checkpoints" / "latest.pt")
    assert find_resume_checkpoint("auto", tmp_path) == latest
    checkpoint.save({"config": {}}, tmp_path / "checkpoints" / "final.pt")
    assert find_resume_checkpoint("auto", tmp_path) is None  # finished: start afresh
    assert find_resume_checkpoint(str(tmp_path), Path(".")) == latest
    assert run_dir_of(latest) == tmp_path
    assert run_dir_of(tmp_path / "elsewhere.pt") == tmp_path
