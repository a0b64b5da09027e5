"""A disk that fills inside `torch.save` (torch's zip writer) ends a single run, a seed batch
and a trial's seed with the one disk-full line and its resume command, and keeps `latest.pt`.

The fault is real torch behaviour, not a raised exception in its place: `checkpoint.save`'s
file object takes some bytes, then its `write` (which torch's C++ zip writer calls) raises
ENOSPC, and torch turns that into a `RuntimeError` whose `__context__` is the `OSError`.
"""

from __future__ import annotations

import builtins
import errno
import io
from pathlib import Path

import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.runner.interrupt import disk_full
from tests.e2e.harness import EXIT_TRAINING, run_cli

TOTAL = 256
TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[8]", f"total_timesteps={TOTAL}",
        "checkpoint.freq=64", "eval.freq=0", "eval.episodes=2", "eval.num_envs=2", "logger=none",
        "progress=off"]
"""8 iterations of 32 env steps, `latest.pt` every 64 steps."""


class Filling:
    """A file that takes `room` bytes, then raises ENOSPC from `write` as a full disk does
    (`OSError` without a file name: `write` does not know it)."""

    def __init__(self, f: io.BufferedWriter, room: int):
        self.f, self.room = f, room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()

    def fileno(self) -> int:
        return self.f.fileno()

    def __enter__(self) -> Filling:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


class FullDisk:
    """`open` for `checkpoint.save`: the first write of `<owner>/checkpoints/latest.pt` over
    an existing one fills the disk part-way through; `kept` holds that file's bytes then."""

    def __init__(self, owner: str):
        self.owner, self.kept, self.target = owner, b"", Path()

    def __call__(self, path, mode="r", *args, **kwargs):
        f = builtins.open(path, mode, *args, **kwargs)
        target = Path(path).with_name("latest.pt")
        if (self.kept or not Path(path).name.startswith(".latest.pt.tmp")
                or target.parent.parent.name != self.owner or not target.is_file()):
            return f
        self.kept, self.target = target.read_bytes(), target
        return Filling(f, room=1000)  # past the zip's first records, inside the pickle's


def test_torch_save_turns_enospc_into_a_runtime_error_that_disk_full_finds(tmp_path):
    with Filling(builtins.open(tmp_path / "x.pt", "wb"), room=1000) as f:
        with pytest.raises(RuntimeError, match="inline_container") as err:
            torch.save({"w": torch.zeros(10_000)}, f)
    assert isinstance(err.value.__context__, OSError)
    assert disk_full(err.value) is err.value.__context__
    assert disk_full(RuntimeError("unexpected pos")) is None


def test_disk_full_is_found_through_causes_and_ignores_other_os_errors():
    quota = OSError(errno.EDQUOT, "Disk quota exceeded")
    outer = ValueError("wrapped")
    outer.__cause__ = RuntimeError("middle")
    outer.__cause__.__context__ = quota
    assert disk_full(outer) is quota
    loop = RuntimeError("a")
    loop.__context__ = RuntimeError("b")
    loop.__context__.__context__ = loop  # a cycle ends the walk
    assert disk_full(loop) is None
    assert disk_full(OSError(errno.EACCES, "Permission denied")) is None


@pytest.mark.parametrize(("mode", "extra", "owner", "resumes"), [
    ("single", [], "run", "run"),
    ("batch", ["num_seeds=2"], "seed_1", "run"),
    ("trial", ["seeds_per_trial=2"], "seed_1", "run/seed_1"),
])
def test_a_disk_full_inside_torch_save_is_one_line_with_the_resume_command(
        mode, extra, owner, resumes, tmp_path, monkeypatch, capfd):
    folder = tmp_path / "run"
    full = FullDisk(owner)
    with monkeypatch.context() as patch:
        patch.setattr(checkpoint, "open", full, raising=False)
        result = run_cli([*TINY, *extra, f"hydra.run.dir={folder}"], tmp_path, monkeypatch, capfd)
    assert full.kept, f"no write of {owner}'s latest.pt over an earlier one\n{result.describe()}"
    assert result.rc == EXIT_TRAINING, result.describe()
    assert "Traceback" not in result.out + result.err, result.describe()
    errors = [ln for ln in result.err.splitlines() if ln.startswith("rltrain: error: ")]
    assert len(errors) == 1, result.describe()
    assert errors[0].startswith("rltrain: error: disk full while writing the run: the last "
                                "good checkpoint is kept; "), errors
    assert errors[0].endswith(f"free space, then rltrain resume={tmp_path / resumes}"), errors
    assert full.target.read_bytes() == full.kept  # the previous latest.pt, untouched
    assert checkpoint.load(full.target)["counters"]["global_step"] == 64
    assert [p.name for p in full.target.parent.glob(".*")] == []  # no temp file left


def one_error(result) -> str:
    """The run ended with exit code 1 and one error line, no traceback: that line."""
    assert result.rc == EXIT_TRAINING, result.describe()
    assert "Traceback" not in result.out + result.err, result.describe()
    errors = [ln for ln in result.err.splitlines() if ln.startswith("rltrain: error: ")]
    assert len(errors) == 1, result.describe()
    return errors[0]


@pytest.mark.parametrize("where", ["seed record", "seeds.json"])
def test_a_disk_full_in_a_trials_own_files_is_one_line(where, tmp_path, monkeypatch, capfd):
    """A trial's own writes (seed 1's `.hydra/` record before it trains, `seeds.json` after
    both): one line saying what is kept and what to do (no command resumes a whole trial)."""
    from omegaconf import OmegaConf

    save, write_text = OmegaConf.save, Path.write_text

    def full_save(config, f, resolve=False):
        if "seed_1" in str(f):
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(config, f, resolve)

    def full_text(self, *args, **kwargs):
        if self.name.startswith(".seeds.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(self, *args, **kwargs)

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        if where == "seed record":
            patch.setattr(OmegaConf, "save", full_save)
        else:
            patch.setattr(Path, "write_text", full_text)
        result = run_cli([*TINY, "seeds_per_trial=2", f"hydra.run.dir={folder}"], tmp_path,
                         monkeypatch, capfd)
    assert one_error(result) == (
        "rltrain: error: disk full while writing the run: the seeds' run folders are kept; free "
        "space, then train the trial again into another hydra.run.dir (no command resumes a "
        "whole trial)")
    assert (folder / "seed_0" / "checkpoints" / "final.pt").is_file()  # seed 0's run, kept
    assert (folder / "seed_1" / "checkpoints" / "final.pt").is_file() == (where == "seeds.json")
    assert not (folder / "seeds.json").exists()


def test_a_disk_full_in_a_search_says_how_to_continue_the_search(tmp_path, monkeypatch, capfd):
    """In a `+hpo=` search the line names the command that continues the search, not the
    resume of the trial's run (which would train that run alone, outside the study)."""
    pytest.importorskip("optuna")
    from rltrain.sweep.search import SEARCH

    full = FullDisk("0")  # trial 0's latest.pt
    try:
        with monkeypatch.context() as patch:
            patch.setattr(checkpoint, "open", full, raising=False)
            result = run_cli(["+hpo=ppo", *TINY, "hydra.sweeper.n_trials=1",
                              f"hydra.sweep.dir={tmp_path / 'hpo'}"], tmp_path, monkeypatch, capfd)
    finally:
        SEARCH.end()  # the process would exit here: give back its handlers and the study's lock
    assert full.kept, result.describe()
    line = one_error(result)
    assert line.startswith("rltrain: error: disk full while writing the run: the study and its "
                           "trial folders are kept; free space, then continue the search with: "
                           "rltrain +hpo=ppo env=CartPole-v1 "), line
    assert "resume=" not in line and line.endswith(f"hydra.sweep.dir={tmp_path / 'hpo'}"), line
