"""One live search per Optuna study, trials left running settled from their folders, and stops
at any moment of a search (rltrain.sweep: `ResumeStudy`, `settle_trials`, `run_seeds`).

In-process and fast: the other search is a small process holding the study folder's lock as a
live search does; signals are raised in this process, with the handlers given back after each
test. tests/e2e/test_study_sharing.py runs the same cases with real `rltrain` processes.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rltrain.sweep import search as sweep_search
from rltrain.sweep import study as sweep_study
from rltrain.sweep import trial as sweep_trial

optuna = pytest.importorskip("optuna")

HOLDER = """
import fcntl, json, os, sys
fds = []
for line in sys.stdin:
    fd = os.open(line.strip(), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, json.dumps({"pid": os.getpid(), "host": "elsewhere", "since": "noon"}).encode())
    fds.append(fd)
    print("held", flush=True)
"""


@pytest.fixture
def holder():
    """Another process: `hold(folder)` makes it take `folder/.lock` as a live run or search
    does (flock and stamp); it lets go when the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def hold(folder: Path) -> int:
        folder.mkdir(parents=True, exist_ok=True)
        proc.stdin.write(f"{folder / '.lock'}\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "held"
        return proc.pid

    yield hold
    proc.stdin.close()
    proc.wait(timeout=10)


@pytest.fixture
def search(tmp_path):
    """(config, storage URL) of a search in `tmp_path/sweep`; the search ends after the test
    (handlers, wakeup pipe and lock given back) whatever the test did."""
    storage = f"sqlite:///{tmp_path}/sweep/optuna.db"
    (tmp_path / "sweep").mkdir()
    config = OmegaConf.create({"hydra": {
        "sweep": {"dir": str(tmp_path / "sweep")},
        "overrides": {"task": ["+hpo=ppo", "env=CartPole-v1"], "hydra": ["hydra.sweeper.n_trials=5"]},
        "sweeper": {"storage": storage, "study_name": "s", "n_trials": 5, "sampler": {"seed": 0}}}})
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield config, storage
    sweep_search.SEARCH.end()
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def running_trial(study, number_folder: int | None = None):
    """Ask a trial as the sweeper does; with `number_folder`, its `hydra.sweep.subdir`."""
    if number_folder is None:
        return study.ask()
    dist = optuna.distributions.IntUniformDistribution(number_folder, number_folder)
    return study.ask({"hydra.sweep.subdir": dist})


def states(storage: str) -> list[tuple[str, float | None]]:
    study = optuna.load_study(study_name="s", storage=storage)
    return [(t.state.name, t.value) for t in study.get_trials()]


def job(folder: Path, status: str = "COMPLETED"):
    """What Hydra hands `on_job_end`: the job's config (its folder) and its return."""
    from hydra.core.utils import JobStatus

    config = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}})
    return config, types.SimpleNamespace(status=JobStatus[status])


def test_a_second_search_of_a_live_study_is_refused_in_one_line(search, holder, capsys):
    config, storage = search
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    running_trial(study, 0)  # the live search's trial
    pid = holder(Path(config.hydra.sweep.dir))  # ... which holds the study's folder
    with pytest.raises(SystemExit) as exit_info:
        sweep_study.ResumeStudy().on_multirun_start(config)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"rltrain: error: study s in {config.hydra.sweep.dir} is in use by a live "
                   f"search (pid {pid} on host elsewhere, since noon); wait for it, stop it "
                   f"(Ctrl-C, or kill -TERM its pid), or choose another hydra.sweep.dir\n")
    assert states(storage) == [("RUNNING", None)]  # the other search's trial is untouched
    assert not sweep_search.SEARCH.active


@pytest.mark.parametrize("case, message", [
    ("garbage", "rltrain: error: cannot read study s in {storage}: file is not a database; "
                "choose another hydra.sweep.dir"),
    ("minimize", "rltrain: error: study s in {storage} was made to maximize; "
                 "hydra.sweeper.direction=minimize cannot continue it: use the study's "
                 "direction, or another hydra.sweep.dir for a new study"),
    ("file", "rltrain: error: cannot create the study's folder {folder}: a file is in the way; "
             "choose another hydra.sweep.dir"),
])
def test_a_study_that_cannot_be_continued_is_one_line_and_exit_2(search, capsys, case, message):
    config, storage = search
    folder = Path(config.hydra.sweep.dir)
    if case == "garbage":
        (folder / "optuna.db").write_text("not sqlite\n")
    if case == "minimize":
        optuna.create_study(study_name="s", storage=storage, direction="maximize")
        config.hydra.sweeper.direction = "minimize"
    if case == "file":
        folder.rmdir()
        folder.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        sweep_study.ResumeStudy().on_multirun_start(config)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == message.format(storage=storage, folder=folder) + "\n"
    assert not (folder / ".lock").exists() and not sweep_search.SEARCH.active


def test_a_search_holds_its_study_until_it_ends(search):
    config, _ = search
    lock = Path(config.hydra.sweep.dir) / ".lock"
    sweep_study.ResumeStudy().on_multirun_start(config)
    assert json.loads(lock.read_text())["pid"] > 0
    probe = subprocess.run([sys.executable, "-c", HOLDER.replace(
        "fcntl.LOCK_EX)", "fcntl.LOCK_EX | fcntl.LOCK_NB)")], input=f"{lock}\n", text=True,
        capture_output=True)
    assert "BlockingIOError" in probe.stderr  # another process cannot take it
    sweep_study.ResumeStudy().on_multirun_end(config)
    assert not lock.exists()


def test_trials_left_running_are_settled_from_their_folders(search, holder, tiny_cfg, caplog):
    """Completed on disk -> COMPLETE with the value the job returned; a live process in its
    folder -> left RUNNING; cut short, stopped or without a folder -> FAIL."""
    from rltrain.runner.runner import Runner

    config, storage = search
    trials = Path(config.hydra.sweep.dir)
    result = Runner(tiny_cfg(eval={"freq": 0}), trials / "0").run()  # a run that completed
    (trials / "1").mkdir()
    (trials / "1" / "seeds.json").write_text(json.dumps(
        {"seeds": [0, 1], "mean_rewards": [1.0, 2.0], "mean_reward": 1.5}))
    (trials / "2" / "checkpoints").mkdir(parents=True)  # cut short: latest.pt only
    shutil.copy(trials / "0" / "checkpoints" / "latest.pt", trials / "2" / "checkpoints")
    holder(trials / "3")  # a run still trains there (its search died, it did not)
    (trials / "4").mkdir()  # stopped by its STOP file, seed 1 of 2
    (trials / "4" / "seeds.json").write_text(json.dumps(
        {"seeds": [0, 1], "mean_rewards": [1.0], "mean_reward": None, "stopped": {"1": "STOP file"}}))
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    for number in range(5):
        running_trial(study, number)
    running_trial(study)  # asked, never given a folder
    with caplog.at_level(logging.INFO, logger="rltrain"):
        sweep_study.ResumeStudy().on_multirun_start(config)
    assert states(storage) == [("COMPLETE", result["mean_reward"]), ("COMPLETE", 1.5),
                               ("FAIL", None), ("RUNNING", None), ("FAIL", None), ("FAIL", None)]
    assert config.hydra.sweeper.n_trials == 3  # 5 in all, 2 completed
    assert f"trial 2 was cut short: marked failed (its folder {trials / '2'} is kept)" in caplog.text
    assert f"trial 3 is left running: a live process trains in {trials / '3'}" in caplog.text


def test_trial_value_reads_what_the_job_returned(tmp_path, tiny_cfg):
    from rltrain.runner.runner import Runner

    folder = tmp_path / "trial"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 3\nseeds_per_trial: 2\nnum_seeds: 1\n")
    means = [Runner(tiny_cfg(seed=s), folder / f"seed_{s}").run()["mean_reward"] for s in (3,)]
    assert sweep_study.trial_value(folder) is None  # seed 4 never ran: the trial is not complete
    means.append(Runner(tiny_cfg(seed=4), folder / "seed_4").run()["mean_reward"])
    assert sweep_study.trial_value(folder) == pytest.approx(sum(means) / 2)  # no seeds.json yet
    assert sweep_study.trial_value(tmp_path / "never") is None


def test_a_signal_in_the_bookkeeping_waits_for_the_next_trial(search, caplog):
    config, _ = search
    callback = sweep_study.ResumeStudy()
    callback.on_multirun_start(config)
    with caplog.at_level(logging.INFO, logger="rltrain"):
        signal.raise_signal(signal.SIGTERM)  # held: the sweeper may be writing the study
        assert "SIGTERM received: the search stops before its next trial" in caplog.text
        with pytest.raises(SystemExit) as exit_info:
            callback.on_job_start(config)
    assert exit_info.value.code == 143
    assert caplog.records[-1].getMessage() == (
        "search stopped (SIGTERM); its study and trial folders are kept. Continue it with: "
        "rltrain +hpo=ppo env=CartPole-v1 hydra.sweeper.n_trials=5")
    assert not (Path(config.hydra.sweep.dir) / ".lock").exists()  # given back


def test_a_second_ctrl_c_in_the_bookkeeping_quits_at_once(search):
    config, _ = search
    sweep_study.ResumeStudy().on_multirun_start(config)
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):  # the CLI: "rltrain: interrupted", exit 130
        signal.raise_signal(signal.SIGINT)


def test_a_signal_in_a_trials_job_outside_its_runs_stops_at_once(search):
    config, _ = search
    callback = sweep_study.ResumeStudy()
    callback.on_multirun_start(config)
    callback.on_job_start(config)
    with pytest.raises(SystemExit) as exit_info:
        signal.raise_signal(signal.SIGINT)  # e.g. while the trial's Runner is being built
    assert exit_info.value.code == 130


def test_a_signal_a_run_took_while_finishing_ends_the_search_after_its_job(search, tmp_path):
    """The Runner's own handler takes it (the stop comes during the final checkpoints: the run
    completes); the search stops before the study records the trial, which the next search
    records from its folder."""
    config, _ = search
    callback = sweep_study.ResumeStudy()
    callback.on_multirun_start(config)
    callback.on_job_start(config)
    ours = signal.signal(signal.SIGINT, lambda *a: None)  # the Runner's handler meanwhile
    signal.raise_signal(signal.SIGINT)
    signal.signal(signal.SIGINT, ours)
    with pytest.raises(SystemExit) as exit_info:
        callback.on_job_end(*job(tmp_path / "trial"))
    assert exit_info.value.code == 130


def test_a_trial_its_stop_file_stopped_ends_the_search_unrecorded(search, tmp_path):
    """A STOP file stops the trial's run; the job still returns (the last eval, or NaN), which
    the sweeper would record as the trial's value: the search ends first, exit 0."""
    config, _ = search
    callback = sweep_study.ResumeStudy()
    callback.on_multirun_start(config)
    done = tmp_path / "done"
    done.mkdir()
    (done / "seeds.json").write_text(json.dumps({"mean_reward": 2.0}))
    callback.on_job_start(config)
    callback.on_job_end(*job(done))  # a completed trial: the search goes on
    callback.on_job_start(config)
    callback.on_job_end(*job(tmp_path / "missing", "FAILED"))  # the sweeper records a failure
    callback.on_job_start(config)
    with pytest.raises(SystemExit) as exit_info:
        callback.on_job_end(*job(tmp_path / "stopped"))
    assert exit_info.value.code == 0


class FakeRunner:
    """Stands in for `Runner` in `run_seeds`: each seed's outcome comes from `PLAN`."""

    PLAN: dict[int, tuple[dict, str | None]] = {}  # seed -> (result, stop_reason)
    trained: list[int] = []

    def __init__(self, cfg, run_dir):
        self.seed = cfg.seed
        self.stopper = types.SimpleNamespace(signum=None)
        self.state = types.SimpleNamespace(stop=False, stop_reason=None)

    def run(self) -> dict:
        FakeRunner.trained.append(self.seed)
        result, reason = FakeRunner.PLAN[self.seed]
        self.state.stop, self.state.stop_reason = reason is not None, reason
        return result


@pytest.fixture
def fake_runner(monkeypatch):
    monkeypatch.setattr(sweep_trial, "Runner", FakeRunner)
    FakeRunner.trained = []
    return FakeRunner


def test_a_stop_file_ends_a_trial_at_its_seed(fake_runner, tiny_cfg, tmp_path):
    fake_runner.PLAN = {0: ({"mean_reward": 3.0}, None),
                        1: ({"mean_reward": 1.0, "stopped": "STOP file"}, "STOP file"),
                        2: ({"mean_reward": 9.0}, None)}
    value = sweep_trial.run_seeds(tiny_cfg(seeds_per_trial=3), tmp_path)
    assert math.isnan(value) and fake_runner.trained == [0, 1]
    assert json.loads((tmp_path / "seeds.json").read_text()) == {
        "seeds": [0, 1, 2], "mean_rewards": [3.0], "mean_reward": None, "score": None,
        "score_of": "mean", "stopped": {"1": "STOP file"}}
    assert sweep_study.trial_value(tmp_path) is None


def test_a_signal_during_a_seeds_final_checkpoints_ends_the_trial_there(
        fake_runner, tiny_cfg, tmp_path):
    fake_runner.PLAN = {0: ({"mean_reward": 3.0}, "SIGTERM"), 1: ({"mean_reward": 5.0}, None)}
    with pytest.raises(SystemExit) as exit_info:
        sweep_trial.run_seeds(tiny_cfg(seeds_per_trial=2), tmp_path)
    assert exit_info.value.code == 143 and fake_runner.trained == [0]
    assert not (tmp_path / "seeds.json").exists()
    fake_runner.trained = []
    fake_runner.PLAN = {0: ({"mean_reward": 3.0}, None), 1: ({"mean_reward": 5.0}, "SIGINT")}
    assert sweep_trial.run_seeds(tiny_cfg(seeds_per_trial=2), tmp_path) == 4.0  # the last: complete
    assert json.loads((tmp_path / "seeds.json").read_text())["mean_reward"] == 4.0
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
