"""Data-parallel PPO under real `torchrun` subprocesses (2 ranks, gloo on CPU, tiny budgets):
one run folder, parameters equal across ranks after every update, normalizers merged, a NaN or
a stop on one rank only, exact resume at the same world size, refusals, a killed rank, SIGTERM,
and `rltrain eval` of the result without torchrun."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.evaluation.command import evaluate
from rltrain.export.command import export_policy
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
PPO = ["algo=ppo", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32", "algo.batch_size=32",
       "algo.n_epochs=2", "algo.hidden_sizes=[16]", "eval.episodes=2", "eval.num_envs=2",
       "logger=none", "logger.log_freq=128", "progress=off"]


def torchrun(ranks: int, args: list[str], cwd: Path, timeout: float = 180,
             **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "RLTRAIN_DIST_TIMEOUT": "60", "PYTHONFAULTHANDLER": "1"}  # a SIGABRT shows its stack
    return subprocess.run([*TORCHRUN, f"--nproc_per_node={ranks}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def failure(done: subprocess.CompletedProcess) -> str:
    """What a failed torchrun printed: the ranks' own lines (before torchrun's summary) and the
    summary; a rank killed by a signal (SIGABRT) says why only in its own lines."""
    own = [line for line in done.stderr.splitlines()
           if "torch.distributed" not in line and line.strip()]
    return "\n".join(own[:40]) + "\n...\n" + done.stderr[-1500:]


def steps_of(run: Path) -> list[int]:
    rows = (run / "metrics.csv").read_text().splitlines()[1:]
    return [int(r.split(",")[0]) for r in rows if ",train/loss," in r]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return checkpoint.load(path)["algo"]["policy"]


def test_two_ranks_train_one_run_in_one_folder_and_resume_exactly(tmp_path, monkeypatch, capfd):
    done = torchrun(2, ["-m", "rltrain", *PPO, "total_timesteps=1024", "checkpoint.freq=512"],
                    tmp_path)
    assert done.returncode == 0, failure(done)
    runs = [p for p in (tmp_path / "outputs").glob("*/*") if p.is_dir()]
    assert len(runs) == 1, runs  # one folder, however many ranks (and timestamps)
    run = runs[0]
    steps = steps_of(run)
    assert steps == list(range(128, 1025, 128))  # one row per update: 2 ranks x 2 envs x 32
    assert "2 ranks x 2" in (run / "train.log").read_text()
    final = checkpoint.load(run / "checkpoints" / "final.pt")
    assert final["world"]["size"] == 2 and len(final["world"]["ranks"]) == 1
    assert final["counters"]["global_step"] == 1024
    # eval and export need no torchrun
    assert evaluate(run / "checkpoints" / "final.pt", episodes=2, write=False)["episodes"] == 2
    exported = export_policy(run / "checkpoints" / "final.pt", "torchscript", check_samples=200)
    assert exported["ok"], exported
    # resume a copy from its halfway checkpoint, same world size: the same final weights
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    for name in ("final.pt", "latest.pt", "best.pt", "step_000001024.pt"):
        (copy / "checkpoints" / name).unlink(missing_ok=True)
    half = copy / "checkpoints" / "step_000000512.pt"
    # another world size is refused in one line, before anything runs (a plain `rltrain`: the
    # entry point in-process, as tests/e2e/harness.py runs refusals)
    plain = run_cli([f"resume={half}"], tmp_path, monkeypatch, capfd)
    assert_refused(plain, EXIT_USAGE, "was written by 2 ranks; resuming with 1")
    again = torchrun(2, ["-m", "rltrain", f"resume={half}"], tmp_path)
    assert again.returncode == 0, failure(again)
    resumed = weights(copy / "checkpoints" / "final.pt")
    assert all(torch.equal(resumed[k], final["algo"]["policy"][k]) for k in resumed)


@pytest.mark.parametrize("mode", ["sync", "a2c", "nan", "stop"])
def test_ranks_stay_equal_and_agree_on_every_stop(mode, tmp_path):
    out = tmp_path / "seen.json"
    started = time.monotonic()
    done = torchrun(2, [str(ROOT / "tests" / "e2e" / "torchrun_probe.py"), mode,
                        str(tmp_path / "run"), str(out)], tmp_path, timeout=120)
    assert time.monotonic() - started < 100  # nobody waited for a collective timeout
    assert done.returncode == 0, failure(done)
    seen = json.loads(out.read_text())
    assert seen["equal"] and all(seen["equal"])  # parameters bitwise equal after every update
    assert seen["obs_mean_equal"] and all(seen["obs_mean_equal"])  # normalizers merged
    if mode in ("sync", "a2c"):
        assert seen["global_step"] == 1024 and seen["updates"] == 8
    elif mode == "nan":  # rank 1's NaN reaches rank 0 through the averaged metrics
        assert "non-finite train/loss" in seen["error"] and seen["updates"] == 3
    else:  # rank 1's stop stops rank 0 at the same step, with one checkpoint
        assert seen["result"]["stopped"] == "a stop on another rank"
        assert seen["global_step"] == 3 * 128
        assert checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")[
            "counters"]["global_step"] == 3 * 128


def test_world_size_one_under_torchrun_logs_what_a_plain_run_logs(tmp_path, monkeypatch, capfd):
    args = [*PPO, "total_timesteps=256", "seed=3"]
    plain = run_cli([*args, "hydra.run.dir=plain"], tmp_path, monkeypatch, capfd)  # in-process
    assert plain.rc == 0, plain.describe()
    one = torchrun(1, ["-m", "rltrain", *args, "hydra.run.dir=one"], tmp_path)
    assert one.returncode == 0, failure(one)

    def values(run: str) -> list[tuple[str, str, str]]:
        rows = (tmp_path / run / "metrics.csv").read_text().splitlines()[1:]
        return [(s, n, v) for s, _, n, v in (r.split(",") for r in rows)
                if not n.startswith(("time/", "final/wall_clock"))]

    assert values("plain") == values("one")


def test_off_policy_under_torchrun_is_refused_in_one_line(tmp_path):
    done = torchrun(2, ["-m", "rltrain", "algo=sac", "env=Pendulum-v1"], tmp_path, timeout=120)
    assert done.returncode != 0
    assert "algo=sac is off-policy" in done.stderr and "sweep launcher" in done.stderr
    assert f'File "{ROOT / "rltrain"}' not in done.stderr  # (torchrun prints its own traceback)
    assert not (tmp_path / "outputs").exists()


def test_a_job_that_fails_before_its_first_step_leaves_no_run_folder(tmp_path):
    """As a plain run (tests/e2e/test_trust.py): a start that fails once Hydra wrote .hydra/
    and train.log (an env whose sim_state() no checkpoint can hold) leaves none of the folders
    rank 0 created for it; only rank 0's note for restarts stays. (A named hydra.run.dir takes
    the same `claim_run_dir` path: tests/e2e/test_trust.py tries it without torchrun.)"""
    (tmp_path / "mine").mkdir()
    bad = ["env.id=tests.envs.state_envs:DequeStateEnv", "env.import=tests.envs.state_envs"]
    done = torchrun(2, ["-m", "rltrain", *PPO, *bad], tmp_path, timeout=120)  # outputs/<date>/..
    assert done.returncode != 0
    assert "checkpoints cannot hold its state" in done.stderr, failure(done)
    left = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}
    assert {p for p in left if not p.startswith("outputs/.torchrun")} == {"mine", "outputs"}


def _start(args: list[str], cwd: Path, *launcher: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "RLTRAIN_DIST_TIMEOUT": "30", "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen([*TORCHRUN, *launcher, "--nproc_per_node=2", "-m", "rltrain", *PPO,
                             *args],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not path.is_file():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.2)


def _rank_pid(rank: int, run: Path) -> int:
    """The pid of the worker of `rank` training into `run` (read from its environment)."""
    out = subprocess.run(["pgrep", "-f", f"hydra.run.dir={run.name}"], capture_output=True,
                         text=True)
    for pid in (int(p) for p in out.stdout.split()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ and b"TORCHELASTIC_RUN_ID" in b" ".join(environ):
            return pid
    raise AssertionError(f"no worker of rank {rank} found")


def test_sigterm_to_torchrun_stops_every_rank_with_one_checkpoint(tmp_path):
    proc = _start(["total_timesteps=10000000", "checkpoint.freq=256", "hydra.run.dir=run"],
                  tmp_path)
    _wait_for(tmp_path / "run" / "checkpoints" / "latest.pt", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode != 0  # torchrun reports its workers' signal exit
    log = (tmp_path / "run" / "train.log").read_text()
    assert "stopped (SIGTERM) at step" in log
    latest = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert latest["world"]["size"] == 2 and latest["counters"]["global_step"] < 10000000
    # the resume line names torchrun (a plain `rltrain resume=` of 2 ranks' run is refused);
    # followed as printed, with a budget one update further, it finishes the run
    line = next(ln for ln in log.splitlines() if "Resume with: " in ln).split("Resume with: ")[1]
    words = shlex.split(line)
    assert words[:3] == ["torchrun", "--standalone", "--nproc_per_node=2"], line
    assert words[3:] == ["-m", "rltrain", f"resume={tmp_path / 'run'}"], line
    step = latest["counters"]["global_step"]
    resumed = subprocess.run([*TORCHRUN[:-1], *words[1:], f"total_timesteps={step + 128}"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=180,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, failure(resumed)
    final = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert final["counters"]["global_step"] == step + 128


def test_a_killed_rank_ends_the_job_within_a_minute_with_a_loadable_checkpoint(tmp_path):
    proc = _start(["total_timesteps=10000000", "checkpoint.freq=256", "hydra.run.dir=run"],
                  tmp_path)
    _wait_for(tmp_path / "run" / "checkpoints" / "latest.pt", proc)
    killed = time.monotonic()
    os.kill(_rank_pid(1, tmp_path / "run"), signal.SIGKILL)
    proc.communicate(timeout=90)
    assert time.monotonic() - killed < 60
    assert proc.returncode != 0
    assert checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")["world"]["size"] == 2


def test_with_max_restarts_the_restarted_group_resumes_the_same_run(tmp_path):
    """torchrun's store outlives the killed group: the restarted ranks must not read the old
    ranks' addresses from it (they did, before the process group got a per-attempt prefix)."""
    proc = _start(["total_timesteps=3072", "checkpoint.freq=512", "hydra.run.dir=run"],
                  tmp_path, "--max-restarts=1")
    _wait_for(tmp_path / "run" / "checkpoints" / "latest.pt", proc)
    os.kill(_rank_pid(1, tmp_path / "run"), signal.SIGKILL)
    _, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, "\n".join(
        line for line in err.splitlines() if "rltrain" in line or "rank" in line)[-3000:]
    log = (tmp_path / "run" / "train.log").read_text()
    assert "exactly" in log and "resuming" in log  # from latest.pt, not from scratch
    assert checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")[
        "counters"]["global_step"] == 3072
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs", "run"]  # outputs/.torchrun
