"""The fault table: a stop at any phase of a single run and of a seed batch keeps the run.

mode (single run, batch of 2 seeds) x phase (rollout, update, periodic evaluation, checkpoint
write, final evaluation, the first seed's final write, final write, batch summary) x stop (SIGINT, SIGTERM, STOP file, and a
full disk where something is written). Every cell runs `rltrain` in-process (the entry point
with an argv list): the stop is delivered from inside the phase, by a hook on the function
that phase runs (a real signal to this process, a real `STOP` file, or an ENOSPC from the
checkpoint writer). Each cell checks the exit code, exactly one resume line naming the run's
folder (the batch's, for a batch), no traceback, and then that `resume=<folder>` finishes the
budget with every seed's `final.pt` at the last step. A stop that lands after the last
checkpoint is written (the final write, the batch summary) finds the run complete: exit 0, no
resume needed. Optuna trials: `tests/test_study_sharing.py`; torchrun ranks (real processes):
`tests/e2e/test_torchrun.py`.
"""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest

from rltrain.buffers.rollout import RolloutBuffer
from rltrain.checkpoint import format as checkpoint
from rltrain.envs.vec_env import GymVecEnv
from tests.e2e.harness import no_stray_signal, run_cli

TOTAL = 256
TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[8]", f"total_timesteps={TOTAL}",
        "checkpoint.freq=64", "eval.episodes=2", "eval.num_envs=2", "logger=none",
        "progress=off"]
"""8 iterations of 32 env steps, a checkpoint every 2 (64 steps), evaluations of 2 episodes."""

STOPS = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM, "STOP": 0}
"""Each way to stop, and the exit code it gives (a STOP file is a stop the user asked for)."""


class Stop:
    """Delivers one stop, once, from inside the phase a hook runs in."""

    def __init__(self, kind: str, folder: Path):
        self.kind, self.folder, self.fired = kind, folder, False

    def __call__(self) -> None:
        if self.fired:
            return
        self.fired = True
        if self.kind == "STOP":
            (self.folder / "STOP").touch()
        elif self.kind == "disk":
            raise OSError(errno.ENOSPC, "No space left on device", str(self.folder / "x.pt"))
        else:
            os.kill(os.getpid(), getattr(signal, self.kind))


def hook(monkeypatch: pytest.MonkeyPatch, phase: str, stop: Stop, batch: bool) -> None:
    """Patch the function `phase` runs so that it delivers `stop` the first time it runs after
    the first checkpoint of the run (so that a stop before it is not the case tried)."""
    state = {"evals": 0, "saves": 0, "in_eval": False}

    def armed() -> bool:
        return state["saves"] > 0

    import rltrain.evaluation.episodes as evaluation
    import rltrain.runner.runner as runner_module
    import rltrain.seed_batch.runner as seed_runner

    run_episodes, save, step = runner_module.run_episodes, checkpoint.save, GymVecEnv.step
    finish, summary = RolloutBuffer.finish, seed_runner.strict_json

    def on_eval(*args, **kwargs):
        state["evals"] += 1
        if phase == "periodic_eval" and armed() or phase == "final_eval":
            stop()
        state["in_eval"] = True
        try:
            return run_episodes(*args, **kwargs)
        finally:
            state["in_eval"] = False

    def on_save(payload, path):
        name, owner = Path(path).name, Path(path).parent.parent.name
        final = name == "final.pt"
        if (phase == "checkpoint_write" and armed() and name.startswith("step_")
                or phase == "final_write" and final and owner in ("run", "seed_1")
                or phase == "first_seed_final_write" and final and owner == "seed_0"):
            stop()
        state["saves"] += 1
        return save(payload, path)

    def on_step(self, action):
        if phase == "rollout" and armed() and not state["in_eval"]:
            stop()
        return step(self, action)

    def on_finish(self, *args, **kwargs):
        if phase == "update" and armed():
            stop()
        return finish(self, *args, **kwargs)

    def on_summary(data):
        if phase == "batch_summary":
            stop()
        return summary(data)

    monkeypatch.setattr(runner_module, "run_episodes", on_eval)
    monkeypatch.setattr(evaluation, "run_episodes", on_eval)
    monkeypatch.setattr(checkpoint, "save", on_save)
    monkeypatch.setattr(GymVecEnv, "step", on_step)
    monkeypatch.setattr(RolloutBuffer, "finish", on_finish)
    monkeypatch.setattr(seed_runner, "strict_json", on_summary)


@pytest.fixture(autouse=True)
def no_plots(request, monkeypatch):
    """The learning-curve PNGs and the batch report (a second each, matplotlib) are drawn only
    where the phase tried is theirs: the batch summary."""
    import rltrain.runner.runner as runner_module
    import rltrain.seed_batch.runner as seed_runner

    monkeypatch.setattr(runner_module, "write_run_curve", lambda run_dir: None)
    if "batch_summary" not in request.node.name:
        monkeypatch.setattr(seed_runner, "write_report", lambda folder: None)


PHASES = ("rollout", "update", "periodic_eval", "checkpoint_write", "final_eval",
          "first_seed_final_write", "final_write", "batch_summary")
BATCH_ONLY = ("first_seed_final_write", "batch_summary")
"""A batch's seeds finish one after the other (a stop between them stops the ones left), and
the batch writes its summary last."""
COMPLETE = ("final_write", "batch_summary")
"""Phases after the last checkpoint of a run is written: a stop there finds the run complete."""
DISK = ("checkpoint_write", "first_seed_final_write", "final_write")
"""Phases that write, where a full disk is tried."""

CELLS = [(mode, phase, kind) for mode in ("single", "batch") for phase in PHASES
         for kind in (*STOPS, *(("disk",) if phase in DISK else ()))
         if mode == "batch" or phase not in BATCH_ONLY]


def cell_id(cell: tuple[str, str, str]) -> str:
    return "-".join(cell)


def seeds_of(mode: str) -> list[int]:
    return [0, 1] if mode == "batch" else [0]


def final_steps(folder: Path, mode: str) -> dict[int, int | None]:
    """Seed -> the step of its `final.pt` (None: not written)."""
    out = {}
    for seed in seeds_of(mode):
        root = folder / f"seed_{seed}" if mode == "batch" else folder
        final = root / "checkpoints" / "final.pt"
        out[seed] = checkpoint.load(final)["counters"]["global_step"] if final.is_file() else None
    return out


@pytest.mark.usefixtures(no_stray_signal.__name__)
@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_a_stop_at_any_phase_keeps_the_run(cell, tmp_path, monkeypatch, capfd):
    mode, phase, kind = cell
    folder = tmp_path / "run"
    freq = "eval.freq=0" if phase == "final_eval" else "eval.freq=128"
    argv = [*TINY, freq, f"hydra.run.dir={folder}", *(["num_seeds=2"] if mode == "batch" else [])]
    with monkeypatch.context() as patch:
        stop = Stop(kind, folder)
        hook(patch, phase, stop, mode == "batch")
        first = run_cli(argv, tmp_path, monkeypatch, capfd)
    text = first.out + first.err
    assert stop.fired, f"the {phase} hook never ran\n{first.describe()}"
    assert "Traceback" not in text, first.describe()
    assert not (folder / "STOP").exists(), "the STOP file was not consumed"
    if kind != "disk" and phase in COMPLETE:  # the stop found the run complete
        assert first.rc == 0, first.describe()
        assert "Resume with" not in text, first.describe()
        assert final_steps(folder, mode) == {s: TOTAL for s in seeds_of(mode)}
        if kind != "STOP":
            assert "complete" in text, first.describe()
        return
    if kind == "disk":
        assert first.rc == 1, first.describe()
        errors = [ln for ln in first.err.splitlines() if ln.startswith("rltrain: error: ")]
        assert len(errors) == 1 and "disk full" in errors[0], first.describe()
        assert f"resume={folder}" in errors[0], first.describe()
    else:
        assert first.rc == STOPS[kind], first.describe()
        lines = [ln for ln in text.splitlines() if "Resume with" in ln]
        assert len(lines) == 1, first.describe()
        assert lines[0].rstrip().endswith(f"Resume with: rltrain resume={folder}"), lines
    if mode == "batch":  # however the batch ended, its record names every seed
        summary = json.loads((folder / "seeds.json").read_text())
        assert summary["seeds"] == [0, 1]
    resumed = run_cli([f"resume={folder}"], tmp_path, monkeypatch, capfd)
    assert resumed.rc == 0, resumed.describe()
    assert "Traceback" not in resumed.out + resumed.err, resumed.describe()
    assert final_steps(folder, mode) == {s: TOTAL for s in seeds_of(mode)}
    if mode == "batch":
        summary = json.loads((folder / "seeds.json").read_text())
        assert sorted(summary["final_eval"]) == ["0", "1"] and not summary["stopped"], summary
