"""A seed batch's folder is one run: protected as a run's, resumed as one, its record strict.

In-process (`run_cli`): a new run or `resume=auto` into a batch folder, `resume=<batch>` with
`num_seeds=` restated or changed, `num_seeds=N resume=auto` on an empty folder (what a cluster
requeue script runs every time), seeds left at different steps (one behind, one complete, one
without a checkpoint) resumed as one batch, and `seeds.json` as strict JSON.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rltrain.checkpoint import format as checkpoint
from tests.e2e.harness import assert_refused, no_stray_signal, run_cli
from tests.seed_batch.helpers import MOVED, assert_parameters_follow

TOTAL = 256
TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[8]", "checkpoint.freq=64", "eval.freq=0",
        "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off"]


def strict(path: Path) -> dict:
    """`path` read as strict JSON (a bare NaN or Infinity fails)."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{path} holds a bare {name}: not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def step_of(path: Path) -> int:
    return checkpoint.load(path)["counters"]["global_step"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A complete batch of 2 seeds (the tests copy it before they change anything)."""
    tmp = tmp_path_factory.mktemp("batch")
    mp, cap = pytest.MonkeyPatch(), _Capture()
    try:
        done = run_cli([*TINY, f"total_timesteps={TOTAL}", "num_seeds=2",
                        f"hydra.run.dir={tmp / 'batch'}"], tmp, mp, cap)
    finally:
        mp.undo()
    assert done.rc == 0, done.describe()
    return tmp / "batch"


class _Capture:
    """`capfd`'s two calls, for a module fixture (capfd is function-scoped)."""

    def readouterr(self) -> tuple[str, str]:
        return "", ""


def copy_of(batch: Path, tmp_path: Path) -> Path:
    target = tmp_path / "batch"
    shutil.copytree(batch, target)
    return target


def test_a_new_run_into_a_batch_folder_is_refused_and_its_record_kept(finished, tmp_path,
                                                                        monkeypatch, capfd):
    batch = copy_of(finished, tmp_path)
    record = (batch / ".hydra" / "config.yaml").read_text()
    single = run_cli([*TINY, f"hydra.run.dir={batch}"], tmp_path, monkeypatch, capfd)
    assert_refused(single, 2, "already holds a run")
    auto = run_cli([*TINY, "resume=auto", f"hydra.run.dir={batch}"], tmp_path, monkeypatch, capfd)
    assert_refused(auto, 2, "holds a finished batch of seeds")
    assert (batch / ".hydra" / "config.yaml").read_text() == record
    assert sorted(p.name for p in batch.glob("seed_*")) == ["seed_0", "seed_1"]
    assert not (batch / "checkpoints").exists() and not (batch / "metrics.csv").exists()


def test_resume_of_a_batch_accepts_its_own_num_seeds_and_refuses_another(finished, tmp_path,
                                                                         monkeypatch, capfd):
    batch = copy_of(finished, tmp_path)
    other = run_cli([f"resume={batch}", "num_seeds=3"], tmp_path, monkeypatch, capfd)
    assert_refused(other, 2, "num_seeds=3 would change the batch (it holds 2 seeds")
    longer = run_cli([f"resume={batch}", "num_seeds=2", "seed=0",
                      f"total_timesteps={TOTAL + 64}"], tmp_path, monkeypatch, capfd)
    assert longer.rc == 0, longer.describe()
    assert [step_of(batch / f"seed_{s}" / "checkpoints" / "final.pt") for s in (0, 1)] == \
        [TOTAL + 64] * 2
    assert sorted(strict(batch / "seeds.json")["final_eval"]) == ["0", "1"]


def test_num_seeds_with_resume_auto_starts_on_an_empty_folder_then_resumes(tmp_path,
                                                                          monkeypatch, capfd):
    batch = tmp_path / "requeued"
    args = [*TINY, "num_seeds=2", "resume=auto", f"hydra.run.dir={batch}"]
    first = run_cli([*args, f"total_timesteps={TOTAL}"], tmp_path, monkeypatch, capfd)
    assert first.rc == 0, first.describe()
    assert sorted(strict(batch / "seeds.json")["final_eval"]) == ["0", "1"]
    again = run_cli([*args, f"total_timesteps={TOTAL}"], tmp_path, monkeypatch, capfd)
    assert_refused(again, 2, "holds a finished batch of seeds")


@pytest.mark.orders
def test_seeds_at_different_steps_resume_as_one_batch_and_none_is_dropped(tmp_path,
                                                                           monkeypatch, capfd):
    """Three seeds left as a kill leaves them: seed 0 at step 192, seed 1 at its step-64
    checkpoint, seed 2 without any checkpoint, no `seeds.json`. The resume catches seeds 1 and
    2 up alone to 192, trains all three to the budget; seed 1 ends with the weights of the
    uninterrupted batch."""
    whole = tmp_path / "whole"
    base = [*TINY, "num_seeds=3", f"total_timesteps={TOTAL}", "checkpoint.keep_last=4"]
    done = run_cli([*base, f"hydra.run.dir={whole}"], tmp_path, monkeypatch, capfd)
    assert done.rc == 0, done.describe()
    batch = tmp_path / "batch"
    shutil.copytree(whole, batch)
    (batch / "seeds.json").unlink()
    ckpts = {s: batch / f"seed_{s}" / "checkpoints" for s in (0, 1, 2)}
    for s in (0, 1):
        for name in ("final.pt", "best.pt", f"step_{TOTAL:09d}.pt"):
            (ckpts[s] / name).unlink()
    shutil.copy(ckpts[0] / "step_000000192.pt", ckpts[0] / "latest.pt")
    shutil.copy(ckpts[1] / "step_000000064.pt", ckpts[1] / "latest.pt")
    split = checkpoint.load(ckpts[1] / "latest.pt")["algo"]["policy"]  # where the paths part
    shutil.rmtree(ckpts[2])
    shutil.rmtree(ckpts[2].parent / "tb", ignore_errors=True)
    (ckpts[2].parent / "metrics.csv").unlink(missing_ok=True)
    resumed = run_cli([f"resume={batch}"], tmp_path, monkeypatch, capfd)
    assert resumed.rc == 0, resumed.describe()
    text = resumed.out + resumed.err
    assert "seed 1 is at step 64, the batch at 192: it catches up alone first (resumed " \
           "exactly)" in text
    assert "seed 2 has no checkpoint: it starts over" in text
    assert "seed 2 is at step 0, the batch at 192: it catches up alone first\n" in text
    # a seed catching up says how it resumed in that line once; its run's lines name the seed
    assert "resumed at step 64" not in text, resumed.describe()
    started = [ln for ln in text.splitlines() if "training ppo on CartPole-v1" in ln]
    assert len(started) == 5 and all("[seed " in ln for ln in started), resumed.describe()
    summary = strict(batch / "seeds.json")
    assert summary["seeds"] == [0, 1, 2]
    assert sorted(summary["final_eval"]) == ["0", "1", "2"] and not summary["stopped"]
    for s in (0, 1, 2):
        assert step_of(ckpts[s] / "final.pt") == TOTAL
    # alone, then batched, against batched throughout: other summation orders, so the weights
    # agree in norm relative to how far they moved since the paths parted (tests/seed_batch/helpers.py)
    mine = checkpoint.load(ckpts[1] / "final.pt")["algo"]["policy"]
    theirs = checkpoint.load(whole / "seed_1" / "checkpoints" / "final.pt")["algo"]["policy"]
    assert_parameters_follow(mine, theirs, split, MOVED, "seed 1")


def test_a_stopped_batch_writes_strict_json_with_every_seed(tmp_path, monkeypatch, capfd):
    """A STOP file before the first evaluation: no seed has a final eval, the IQM is null."""
    batch = tmp_path / "batch"
    batch.mkdir()
    calls = {"n": 0}
    import rltrain.seed_batch.batch as seed_batch

    end = seed_batch.SeedBatch.end_iteration

    def stop_after_two(self):
        calls["n"] += 1
        if calls["n"] == 2:
            (batch / "STOP").touch()
        return end(self)

    monkeypatch.setattr(seed_batch.SeedBatch, "end_iteration", stop_after_two)
    stopped = run_cli([*TINY, "num_seeds=2", f"total_timesteps={TOTAL}",
                       f"hydra.run.dir={batch}"], tmp_path, monkeypatch, capfd)
    assert stopped.rc == 0, stopped.describe()
    summary = strict(batch / "seeds.json")
    assert summary["seeds"] == [0, 1] and summary["iqm"] is None
    assert summary["stopped"] == {"0": "STOP file", "1": "STOP file"}
    lines = [ln for ln in stopped.out.splitlines() if "Resume with" in ln]
    assert len(lines) == 1 and lines[0].endswith(f"Resume with: rltrain resume={batch}")


@pytest.mark.usefixtures(no_stray_signal.__name__)
def test_a_signal_while_a_batch_is_set_up_ends_it_at_once_without_a_trace(tmp_path,
                                                                          monkeypatch, capfd):
    """SIGTERM while seed 1 of 3 is being built (a batch of many seeds takes a while to set
    up): exit 143 at once, one line, and the folder the command created is gone."""
    import os
    import signal

    import rltrain.seed_batch.runner as seed_runner

    built = {"n": 0}
    real = seed_runner.Runner

    def runner(*args, **kwargs):
        built["n"] += 1
        if built["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(seed_runner, "Runner", runner)
    before = signal.getsignal(signal.SIGTERM)  # the fixture's, given back
    batch = tmp_path / "new" / "batch"
    done = run_cli([*TINY, "num_seeds=3", f"total_timesteps={TOTAL}", f"hydra.run.dir={batch}"],
                   tmp_path, monkeypatch, capfd)
    assert done.rc == 128 + signal.SIGTERM, done.describe()
    assert "Traceback" not in done.out + done.err
    assert "SIGTERM received while the batch was set up (2 of 3 seeds built)" in done.out
    assert built["n"] == 2 and not (tmp_path / "new").exists()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_batch_whose_episodes_restart_says_so_once_naming_its_seeds(tmp_path, monkeypatch,
                                                                      capfd):
    """Async envs keep no simulator state: every seed restarts its episodes. The warning was
    said once per seed; a batch says it once, with the seeds (as its other lines do)."""
    batch = tmp_path / "batch"
    first = run_cli([*TINY, "env.vectorization=async", "total_timesteps=64", "num_seeds=3",
                     f"hydra.run.dir={batch}"], tmp_path, monkeypatch, capfd)
    assert first.rc == 0, first.describe()
    again = run_cli([f"resume={batch}", "total_timesteps=128"], tmp_path, monkeypatch, capfd)
    assert again.rc == 0, again.describe()
    said = [line for line in (again.out + again.err).splitlines() if "episodes restart" in line]
    assert len(said) == 1, again.describe()
    assert said[0].endswith("; episodes restart on resume (seeds 0, 1, 2, at step 64)")
    assert "[seed" not in said[0]
