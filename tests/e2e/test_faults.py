"""Faults over the whole life of a run: signals at any moment, two runs into one folder, a full disk.

In-process tests place a signal or a STOP file at an exact moment (the final evaluation, the final
save); subprocess tests send SIGTERM at spread-out moments of a real `rltrain` run. Every graceful
stop must leave a loadable `latest.pt`, the resume hint, no STOP file and no lock behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rltrain.checkpoint import format as checkpoint
from rltrain.runner.runner import Runner
from tests.e2e.harness import EXIT_TRAINING, EXIT_USAGE, assert_refused, marker_env, run_cli

_SCRIPT = Path(sys.executable).with_name("rltrain")
RLTRAIN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "rltrain.cli"]
RUN = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=64",
       "algo.n_epochs=2", "algo.hidden_sizes=[16,16]", "checkpoint.freq=64", "eval.freq=0",
       "eval.episodes=20", "logger.log_freq=0", "progress=plain", "logger=none"]


def final_eval_hook(monkeypatch, runner_total: int, action) -> list[int]:
    """Call `action()` when the final evaluation starts; returns the list it appends calls to."""
    import rltrain.runner.runner as runner_module

    original, calls = runner_module.run_episodes, []

    def wrapped(*args, **kwargs):
        if not calls:
            calls.append(1)
            action()
        return original(*args, **kwargs)

    monkeypatch.setattr(runner_module, "run_episodes", wrapped)
    return calls


def test_sigterm_during_the_final_evaluation_saves_latest_and_resume_finishes(tmp_path, tiny_cfg,
                                                                              monkeypatch):
    cfg = tiny_cfg()  # eval.freq=0: the only evaluation is the final one
    final_eval_hook(monkeypatch, 64, lambda: os.kill(os.getpid(), signal.SIGTERM))
    runner = Runner(cfg, tmp_path)
    result = runner.run()
    assert result["stopped"] == "SIGTERM" and runner.stopper.signum == signal.SIGTERM
    ckpts = tmp_path / "checkpoints"
    assert not (ckpts / "final.pt").exists()
    payload = checkpoint.load(ckpts / "latest.pt")
    assert payload["counters"]["global_step"] == cfg.total_timesteps
    monkeypatch.undo()
    resumed = Runner(cfg, tmp_path, resume_from=payload).run()
    assert "stopped" not in resumed and (ckpts / "final.pt").is_file()
    assert not (tmp_path / ".lock").exists()


def test_stop_file_during_the_final_evaluation_is_consumed_and_saves_latest(tmp_path, tiny_cfg,
                                                                            monkeypatch):
    final_eval_hook(monkeypatch, 64, lambda: (tmp_path / "STOP").touch())
    result = Runner(tiny_cfg(), tmp_path).run()
    assert result["stopped"] == "STOP file"
    assert not (tmp_path / "STOP").exists()
    assert (tmp_path / "checkpoints" / "latest.pt").is_file()
    assert not (tmp_path / "checkpoints" / "final.pt").exists()


def test_sigterm_during_the_final_save_completes_the_run(tmp_path, tiny_cfg, monkeypatch):
    original, sent = checkpoint.save, []

    def save(payload, path):
        if Path(path).name == "latest.pt" and payload["counters"]["global_step"] == 64 and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
        return original(payload, path)

    monkeypatch.setattr(checkpoint, "save", save)
    runner = Runner(tiny_cfg(), tmp_path)
    result = runner.run()
    assert sent and "stopped" not in result and runner.stopper.signum is None
    assert checkpoint.load(tmp_path / "checkpoints" / "final.pt")["counters"]["global_step"] == 64


def test_a_stop_file_left_from_before_the_run_is_removed_not_obeyed(tmp_path, tiny_cfg):
    (tmp_path / "STOP").touch()
    result = Runner(tiny_cfg(total_timesteps=128), tmp_path).run()
    assert "stopped" not in result and not (tmp_path / "STOP").exists()
    assert (tmp_path / "checkpoints" / "final.pt").is_file()


def start(args: list[str], folder: Path) -> tuple[subprocess.Popen, Path]:
    """An `rltrain` subprocess whose stdout and stderr go to one file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "output.txt"
    with open(log, "w") as out:
        proc = subprocess.Popen([*RLTRAIN, *args], cwd=folder, env=marker_env(folder),
                                stdout=out, stderr=subprocess.STDOUT)
    return proc, log


def wait_for(proc: subprocess.Popen, log: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, f"ended early: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.02)


def sigterm_after(delay: float, folder: Path) -> dict:
    """Train 768 steps and send SIGTERM `delay` seconds after training started."""
    proc, log = start([*RUN, "total_timesteps=768", "hydra.run.dir=run"], folder)
    try:
        wait_for(proc, log, "training ppo")
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        proc.kill()
    return {"rc": rc, "output": log.read_text(), "run": folder / "run"}


def test_sigterm_at_spread_out_moments_always_leaves_a_loadable_checkpoint(tmp_path):
    # from the first iterations to past the end: training, final eval (20 episodes), final save
    delays = [0.0, 0.6, 1.5, 3.0]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda d: sigterm_after(d[1], tmp_path / f"d{d[0]}"),
                                enumerate(delays)))
    outcomes = []
    for delay, res in zip(delays, results, strict=True):
        run, out = res["run"], res["output"]
        assert "Traceback" not in out, out[-3000:]
        # 0: finished first; -SIGTERM: killed after its last file was written (nothing to lose)
        assert res["rc"] in (0, 128 + signal.SIGTERM, -signal.SIGTERM), (delay, out[-3000:])
        latest = checkpoint.load(run / "checkpoints" / "latest.pt")  # always loadable
        if res["rc"] != 128 + signal.SIGTERM:
            assert (run / "checkpoints" / "final.pt").is_file() and "done: " in out, out[-3000:]
        else:
            assert "Resume with: rltrain resume=" in out
            assert not (run / "checkpoints" / "final.pt").exists()
        assert not (run / "STOP").exists() and not (run / ".lock").exists()
        outcomes.append((delay, res["rc"], latest["counters"]["global_step"]))
    assert any(rc == 128 + signal.SIGTERM for _, rc, _ in outcomes), outcomes  # signals landed


def test_a_second_run_into_a_live_runs_folder_is_refused_and_the_first_goes_on(
        tmp_path, monkeypatch, capfd):
    """The first run is far longer than the refusals take, whatever the machine's load; it is
    still running after them, and then stops on a STOP file with its checkpoint (exit 0)."""
    run = tmp_path / "a" / "run"
    proc, log = start([*RUN, "total_timesteps=5000000", "hydra.run.dir=run"], tmp_path / "a")
    try:
        wait_for(proc, log, "training ppo")
        for argv in ([*RUN, "hydra.run.dir=a/run"], ["resume=a/run"],
                     [*RUN, "resume=auto", "hydra.run.dir=a/run"]):
            result = run_cli(argv, tmp_path, monkeypatch, capfd)
            assert_refused(result, EXIT_USAGE, "in use by a live run")
        assert proc.poll() is None, log.read_text()[-2000:]  # the first run goes on
        (run / "STOP").touch()
        assert proc.wait(timeout=180) == 0, log.read_text()[-2000:]
    finally:
        proc.kill()
    assert checkpoint.load(run / "checkpoints" / "latest.pt")["counters"]["global_step"] > 0
    assert not (run / ".hydra" / "resume").exists() and not (run / ".lock").exists()


def fill_once_saved(latest: Path, filler: Path, timeout: float = 120) -> None:
    """Wait for the run's first checkpoint, then write `filler` until the disk is full."""
    deadline = time.monotonic() + timeout
    while not latest.is_file():
        assert time.monotonic() < deadline, "the run wrote no checkpoint"
        time.sleep(0.01)
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs mounted in the test (needs root; skipped otherwise)."""
    if os.geteuid() != 0 or sys.platform != "linux":
        pytest.skip("mounting a tmpfs needs root on Linux")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_mid_run_and_at_resume_is_one_line_and_keeps_the_checkpoint(
        small_disk, monkeypatch, capfd):
    argv = [*RUN, "total_timesteps=1e6", "progress=off", "hydra.run.dir=run"]
    with ThreadPoolExecutor(max_workers=1) as pool:  # fills the disk once the run has saved
        filler = pool.submit(fill_once_saved, small_disk / "run" / "checkpoints" / "latest.pt",
                             small_disk / "filler")
        result = run_cli(argv, small_disk, monkeypatch, capfd)
        filler.result()
    assert_refused(result, EXIT_TRAINING, "disk full")
    latest = checkpoint.load(small_disk / "run" / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] > 0
    resumed = run_cli(["resume=run"], small_disk, monkeypatch, capfd)
    assert_refused(resumed, EXIT_TRAINING, "disk full")
    assert checkpoint.load(small_disk / "run" / "checkpoints" / "latest.pt")["counters"] == \
        latest["counters"]
    (small_disk / "filler").unlink()  # space freed: the run continues where it stopped
    step = latest["counters"]["global_step"]
    done = run_cli(["resume=run", f"total_timesteps={step + 128}", "progress=off"], small_disk,
                   monkeypatch, capfd)
    assert done.rc == 0, done.describe()
