"""One launch path (`rltrain/launch.py`): every mode of a training job, started from the command
line (`run_cli`, in-process) and from `rltrain.train()`, ends the same way: the same steps,
final evaluation and files in its folder, or the same refusal line.

Modes: a new run, a resume (`resume=<run>`, `resume=auto`), a seed batch (`num_seeds`), the
resume of a batch (`resume=<batch>`), a trial (`seeds_per_trial`), and torchrun, which
`train()` refuses in one line (the command line under torchrun: `tests/e2e/test_torchrun.py`).
Before, the two entry points dispatched these modes each in their own code: `train(resume=auto)`
refused a run the command line resumed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rltrain.api import train
from rltrain.checkpoint import format as checkpoint
from rltrain.errors import UserError
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli

TINY = ["algo=ppo", "env=CartPole-v1", "total_timesteps=64", "env.num_envs=2", "algo.n_steps=32",
        "algo.batch_size=32", "algo.n_epochs=1", "algo.hidden_sizes=[8]", "eval.freq=0",
        "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off", "checkpoint.freq=0"]
HYDRA_ONLY = {"hydra.yaml"}
"""What Hydra writes and a run from Python does not (Hydra's own settings, `.hydra/hydra.yaml`)."""


@dataclass
class Mode:
    """One row: how to make the folder a job starts from, and the job's overrides."""

    name: str
    overrides: Callable[[Path], list[str]]
    """The job's overrides, given the folder it starts from (its own folder: a new run)."""
    setup: list[str] | None = None
    """The overrides of a run made first, which the job continues (None: a new folder)."""
    drop_final: bool = False
    """Remove the first run's `final.pt` (what `resume=auto` continues is a run not finished)."""
    resumes: bool = False
    """The overrides name the folder (`resume=<folder>`), so the job writes into it."""
    refused: str | None = None
    """The refusal both entry points give (None: both train)."""


MODES = [
    Mode("new run", lambda _: TINY),
    Mode("new run refused", lambda _: [*TINY, "algo.lr=-1"],
         refused="algo.lr=-1.0 must be a finite number > 0"),
    Mode("resume", lambda run: [f"resume={run}", "total_timesteps=128"], setup=TINY, resumes=True),
    Mode("resume refused", lambda run: [f"resume={run}", "algo.gamma=0.5"], setup=TINY,
         resumes=True, refused="resume: `algo.gamma=0.5` would change the experiment"),
    Mode("resume=auto", lambda _: [*TINY, "resume=auto", "total_timesteps=128"], setup=TINY,
         drop_final=True),
    Mode("seed batch", lambda _: [*TINY, "num_seeds=2"]),
    Mode("seed batch refused", lambda _: [*TINY, "num_seeds=2", "seeds_per_trial=2"],
         refused="num_seeds and seeds_per_trial both ask for several seeds"),
    Mode("batch resume", lambda run: [f"resume={run}", "total_timesteps=128"],
         setup=[*TINY, "num_seeds=2"], resumes=True),
    Mode("batch resume refused", lambda run: [f"resume={run}", "num_seeds=3"],
         setup=[*TINY, "num_seeds=2"], resumes=True, refused="num_seeds=3 would change the batch"),
    Mode("trial", lambda _: [*TINY, "seeds_per_trial=2"]),
]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Callable[[list[str], bool], Path]:
    """The first run of a mode that continues one (made once per setup, copied by each test)."""
    cache: dict[tuple[str, ...], Path] = {}

    def make(overrides: list[str], drop_final: bool) -> Path:
        key = (*overrides, str(drop_final))
        if key not in cache:
            folder = tmp_path_factory.mktemp("first") / "run"
            train(overrides, run_dir=folder)
            if drop_final:
                for final in folder.rglob("final.pt"):
                    final.unlink()
            cache[key] = folder
        return cache[key]

    return make


def ending(folder: Path) -> dict:
    """What a job left in `folder`: its files (without Hydra's own settings), each run's final
    step and evaluation, and the seeds' summary."""
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    files = {f for f in files if Path(f).name not in HYDRA_ONLY}
    finals = {}
    for final in sorted(folder.rglob("final.pt")):
        payload = checkpoint.load(final)
        finals[str(final.relative_to(folder))] = (payload["counters"]["global_step"],
                                                  payload["metrics"]["mean_reward"])
    summary = folder / "seeds.json"
    seeds = json.loads(summary.read_text()) if summary.is_file() else None
    if seeds is not None:
        seeds.pop("wall_clock_s", None)  # time
    return {"files": sorted(files), "finals": finals, "seeds": seeds}


@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_a_mode_ends_the_same_from_the_command_line_and_from_python(mode, made, tmp_path,
                                                                    monkeypatch, capfd):
    folders = {}
    for entry in ("cli", "api"):
        folder = tmp_path / entry / "run"
        folder.parent.mkdir()
        if mode.setup is not None:
            shutil.copytree(made(mode.setup, mode.drop_final), folder)
        folders[entry] = folder
    cli_args = [*mode.overrides(folders["cli"]),
                *([] if mode.resumes else [f"hydra.run.dir={folders['cli']}"])]
    done = run_cli(cli_args, tmp_path / "cli", monkeypatch, capfd)
    api_args = list(mode.overrides(folders["api"]))
    run_dir = None if mode.resumes else folders["api"]
    monkeypatch.chdir(tmp_path / "api")
    if mode.refused is not None:
        assert_refused(done, EXIT_USAGE, mode.refused)
        with pytest.raises(UserError) as refused:
            train(api_args, run_dir=run_dir)
        line = done.err.strip().splitlines()[0].removeprefix("rltrain: error: ")
        same = str(refused.value).replace(str(folders["api"]), str(folders["cli"]))
        assert line == same
        return
    assert done.rc == 0, done.describe()
    result = train(api_args, run_dir=run_dir)
    assert not result.get("stopped")
    cli, api = ending(folders["cli"]), ending(folders["api"])
    assert cli["finals"] and cli["finals"] == api["finals"]
    only = set(cli["files"]) ^ set(api["files"])
    assert not only, f"only from the command line: {sorted(set(cli['files']) - set(api['files']))}; only from train(): {sorted(set(api['files']) - set(cli['files']))}"
    assert cli["seeds"] == api["seeds"]


def test_torchrun_is_the_command_lines_and_train_refuses_it_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as refused:
        train(TINY, run_dir=tmp_path / "run")
    assert str(refused.value) == (
        "train() under torchrun (WORLD_SIZE=2) would train 2 separate runs: data-parallel "
        "training is the command line's, one process per rank: torchrun --nproc_per_node=2 "
        "-m rltrain <overrides>")
    assert not list(tmp_path.iterdir())
