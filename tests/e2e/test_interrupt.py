"""The `rltrain` command stopped and resumed, in subprocesses: SIGTERM, SIGINT (once and twice),
a STOP file, `resume=<run>` and `resume=auto`, refused resumes, and a diverging run.

Every command pays Python + torch start-up, so the module's commands run once, three at a time,
in a module-scoped fixture; each test then checks one command's result. Signals are sent once
the run has written a checkpoint (its handlers are installed by then) or, for the run without
checkpoints, shortly after it logs that training started; never after a fixed start-up sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.checkpoint import format as checkpoint

_SCRIPT = Path(sys.executable).with_name("rltrain")
RLTRAIN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "rltrain.cli"]
SMOKE = ["debug=smoke", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=64",
         "algo.batch_size=64", "algo.hidden_sizes=[16,16]", "progress=plain"]
# 128 env steps per iteration, a checkpoint after each, and a budget it never reaches
LONG = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=64", "algo.batch_size=64",
        "algo.n_epochs=2", "algo.hidden_sizes=[16,16]", "total_timesteps=1e6",
        "checkpoint.freq=128", "eval.freq=0", "logger.log_freq=0", "progress=plain"]
HINT = "Resume with: rltrain resume="


class Command:
    """One `rltrain` subprocess writing its output to files in `folder`."""

    def __init__(self, args: list[str], folder: Path, cwd: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = folder / "stdout.txt", folder / "stderr.txt"
        env = {k: v for k, v in os.environ.items() if k != "RLTRAIN_DEBUG"}
        env["SDL_VIDEODRIVER"] = "dummy"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen([*RLTRAIN, *args], cwd=cwd, env=env, stdout=out,
                                         stderr=err)

    @property
    def out(self) -> str:
        return self.out_path.read_text()

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    def wait_for(self, ready: Callable[[], bool], timeout: float = 120) -> None:
        """Poll until `ready()`; fail (and kill the command) if it ends first or time runs out."""
        deadline = time.monotonic() + timeout
        try:
            while not ready():
                assert self.proc.poll() is None, f"ended early, rc={self.proc.returncode}\n{self.err}"
                assert time.monotonic() < deadline, f"timed out\n{self.out}\n{self.err}"
                time.sleep(0.05)
        except BaseException:
            self.kill()
            raise

    def finish(self, timeout: float = 180) -> dict:
        """Wait for the exit; the result the tests check."""
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            self.kill()
        return {"rc": rc, "out": self.out, "err": self.err}

    def kill(self) -> None:
        """SIGKILL the command if it still runs (long runs must not outlive a failed test)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run(args: list[str], folder: Path, cwd: Path) -> dict:
    return Command(args, folder, cwd).finish()


def signalled(tmp: Path, name: str, signals: list[int], extra: Sequence[str] = (),
              ready: Callable[[Command], bool] | None = None, delay: float = 0.0,
              heard: Callable[[], bool] | None = None) -> dict:
    """Start a long run; once it is `ready` (default: its first checkpoint exists, so its signal
    handlers are installed) and `delay` seconds later, send `signals` 0.3 s apart, each after
    the run said it `heard` the one before (when given): two signals sent before the process
    runs again are delivered as one (POSIX signals do not queue), as a loaded CI machine showed."""
    run_dir = tmp / name
    cmd = Command([*LONG, *extra, f"hydra.run.dir={run_dir}"], tmp / f"{name}.log", tmp)
    try:
        cmd.wait_for(lambda: ready(cmd) if ready else (run_dir / "checkpoints" / "latest.pt").exists())
        time.sleep(delay)
        t0 = time.monotonic()
        for i, sig in enumerate(signals):
            if i:
                if heard is not None:
                    cmd.wait_for(heard)
                time.sleep(0.3)
            cmd.proc.send_signal(sig)
        result = cmd.finish()
    finally:
        cmd.kill()
    return {**result, "seconds": time.monotonic() - t0, **stopped_state(run_dir)}


def stop_file_then_resume_auto(tmp: Path) -> dict:
    """Create `<run>/STOP` in a long run, then `resume=auto` in its folder for one more iteration."""
    run_dir = tmp / "stopfile"
    cmd = Command([*LONG, f"hydra.run.dir={run_dir}"], tmp / "stopfile.log", tmp)
    try:
        cmd.wait_for(lambda: (run_dir / "checkpoints" / "latest.pt").exists())
        (run_dir / "STOP").touch()
        out = {"stop": {**cmd.finish(), **stopped_state(run_dir)}}
    finally:
        cmd.kill()
    if out["stop"]["rc"] == 0:
        out["auto"] = run(["resume=auto", f"total_timesteps={out['stop']['step'] + 128}",
                           f"hydra.run.dir={run_dir}"], tmp / "auto", tmp)
    return out


def stopped_state(run_dir: Path) -> dict:
    """What a stopped run left: its folder, latest step, whether final.pt and STOP exist."""
    ckpts = run_dir / "checkpoints"
    step = checkpoint.load(ckpts / "latest.pt")["counters"]["global_step"] if ckpts.exists() else None
    return {"run_dir": run_dir, "step": step, "final": (ckpts / "final.pt").exists(),
            "stop_file": (run_dir / "STOP").exists(), "checkpoints": ckpts.exists()}


def sigterm_then_resume(tmp: Path) -> dict:
    """SIGTERM a long run, then `rltrain resume=<run> total_timesteps=<one more iteration>`."""
    out = {"sigterm": signalled(tmp, "sigterm", [signal.SIGTERM])}
    run_dir = out["sigterm"]["run_dir"]
    if out["sigterm"]["rc"] == 128 + signal.SIGTERM:
        out["config_before"] = (run_dir / ".hydra" / "config.yaml").read_text()
        out["resume"] = run([f"resume={run_dir}", f"total_timesteps={out['sigterm']['step'] + 128}"],
                            tmp / "resume", tmp)
    return out


def sigint_then_refused_resume(tmp: Path) -> dict:
    """SIGINT a long run, then a resume that would change its learning rate."""
    out = {"sigint": signalled(tmp, "sigint", [signal.SIGINT])}
    run_dir = out["sigint"]["run_dir"]
    if out["sigint"]["rc"] == 128 + signal.SIGINT:
        out["latest_bytes"] = (run_dir / "checkpoints" / "latest.pt").read_bytes()
        out["refused"] = run([f"resume={run_dir}", "algo.lr=0.5"], tmp / "refused", tmp)
        out["traces"] = sorted(str(p.relative_to(run_dir)) for p in (run_dir / ".hydra").rglob("*")
                               if "resume" in p.parts)
    return out


def diverging(tmp: Path) -> dict:
    """DQN with lr=1e30: its first gradient steps (at step 257) blow the Q-network up."""
    run_dir = tmp / "diverge"
    args = ["algo=dqn", "env=CartPole-v1", "debug=smoke", "algo.lr=1e30", "algo.learning_starts=32",
            "algo.hidden_sizes=[16,16]", "progress=plain", f"hydra.run.dir={run_dir}"]
    return {**run(args, tmp / "diverge.log", tmp), "run_dir": run_dir}


def guarded(job: Callable[..., dict], *args) -> dict:
    """Run `job`; a failure becomes the result's `error` so that only its own tests fail."""
    try:
        return job(*args)
    except Exception as exc:  # noqa: BLE001 - reported by the tests of this job
        return {"error": f"{type(exc).__name__}: {exc}"}


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("interrupt")
    twice = tmp / "sigint_twice.log"
    jobs = {  # the chains of two commands start first
        "sigterm": (sigterm_then_resume, tmp),
        "sigint": (sigint_then_refused_resume, tmp),
        "stopfile": (stop_file_then_resume_auto, tmp),
        # 20000 epochs: the update the signals interrupt would run for minutes; no checkpoints
        "sigint_twice": (signalled, tmp, "sigint_twice", [signal.SIGINT, signal.SIGINT],
                         ["algo.n_epochs=20000", "checkpoint.freq=0"],
                         InUpdate(lambda: "training ppo" in read(twice)), 0.0,
                         lambda: "Ctrl-C again to quit now" in read(twice)),
        "diverge": (diverging, tmp),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(guarded, *job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


class InUpdate:
    """Ready once the command is inside its first (minutes-long) update: `started()` holds and
    the process has since used `UPDATE_CPU_SECONDS` of CPU. A signal that lands before the
    update (before the loop, or in the rollout) is a graceful stop that writes `latest.pt`, so
    a wall-clock delay after the start line raced on a loaded machine; CPU time does not."""

    UPDATE_CPU_SECONDS = 1.5  # the 128-step rollout takes well under 0.1 s of CPU

    def __init__(self, started: Callable[[], bool]):
        self.started, self.cpu0 = started, None

    def __call__(self, cmd: Command) -> bool:
        if self.cpu0 is None:
            if not self.started():
                return False
            self.cpu0 = cpu_seconds(cmd.proc.pid)
        return cpu_seconds(cmd.proc.pid) - self.cpu0 >= self.UPDATE_CPU_SECONDS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid`, all its threads (Linux `/proc`); elsewhere
    the wall-clock seconds since the epoch, so that `InUpdate` waits that long instead."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return time.time()
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read(folder: Path) -> str:
    path = folder / "stdout.txt"
    return path.read_text() if path.exists() else ""


def result(cli: dict, job: str, *keys: str) -> dict:
    """One command's result (`keys` walk into a chain's results); fails on a job error."""
    res = cli[job]
    assert "error" not in res, res.get("error")
    for key in keys:
        assert key in res, f"{job}: {key} did not run: {describe(res)}"
        res = res[key]
    return res


def describe(res: dict) -> str:
    if "rc" not in res:
        return " ".join(f"{k}: {describe(v)}" for k, v in res.items() if isinstance(v, dict))
    return f"rc={res['rc']}\n--- stdout\n{res['out'][-3000:]}\n--- stderr\n{res['err'][-3000:]}"


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0}).Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def assert_one_error_line(res: dict, code: int, start: str) -> None:
    assert res["rc"] == code, describe(res)
    lines = res["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), describe(res)
    assert "Traceback" not in res["out"] + res["err"]


# ---- signals and the STOP file ----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_after_the_iteration_saves_latest_and_exits_128_plus_signum(cli, sig):
    name = signal.Signals(sig).name
    res = result(cli, name.lower(), name.lower())
    assert res["rc"] == 128 + sig, describe(res)
    assert f"{name} received: stopping after this iteration" in res["out"]
    assert f"{HINT}{res['run_dir']}" in res["out"]
    assert res["step"] >= 128 and res["step"] % 128 == 0  # whole iterations only
    assert not res["final"]
    assert "Traceback" not in res["out"] + res["err"]


def test_second_sigint_quits_at_once_without_finishing_the_iteration(cli):
    res = result(cli, "sigint_twice")
    # Python re-raises an unhandled KeyboardInterrupt as death by SIGINT (a shell shows 130)
    assert res["rc"] in (-signal.SIGINT, 128 + signal.SIGINT), describe(res)
    assert "Ctrl-C again to quit now" in res["out"]
    # no graceful stop: the iteration was not finished, so no checkpoint was written
    assert not res["checkpoints"]
    assert HINT not in res["out"]


def test_stop_file_stops_gracefully_with_exit_zero_and_is_consumed(cli):
    res = result(cli, "stopfile", "stop")
    assert res["rc"] == 0, describe(res)
    assert "stopped (STOP file)" in res["out"] and f"{HINT}{res['run_dir']}" in res["out"]
    assert not res["stop_file"] and not res["final"]
    assert res["step"] >= 128 and res["step"] % 128 == 0


# ---- resuming from the command line -----------------------------------------------------------

def assert_continued(res: dict, run_dir: Path, stopped: int) -> None:
    """The resumed command went on from `stopped` for one iteration, in the same folder."""
    assert res["rc"] == 0, describe(res)
    assert f"resumed at step {stopped:,} exactly" in res["out"]
    final = checkpoint.load(run_dir / "checkpoints" / "final.pt")
    assert final["counters"]["global_step"] == stopped + 128
    # both sessions' steps, each once, in order (TensorBoard and metrics.csv)
    assert [s for s, _ in scalars(run_dir, "train/policy_loss")] == list(range(128, stopped + 129, 128))
    rows = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    loss_steps = [int(r.split(",")[0]) for r in rows if ",train/policy_loss," in r]
    assert loss_steps == list(range(128, stopped + 129, 128))
    assert not (run_dir.parent / "outputs").exists()  # nothing went to a new dated run dir


def test_resume_of_a_run_dir_continues_its_steps_in_the_same_folder(cli):
    chain = result(cli, "sigterm")
    run_dir = chain["sigterm"]["run_dir"]
    assert_continued(result(cli, "sigterm", "resume"), run_dir, chain["sigterm"]["step"])
    assert (run_dir / ".hydra" / "config.yaml").read_text() == chain["config_before"]
    overrides = (run_dir / ".hydra" / "resume" / "overrides.yaml").read_text()
    assert f"resume={run_dir}" in overrides and "total_timesteps=" in overrides


def test_resume_auto_continues_a_run_stopped_by_its_stop_file(cli):
    chain = result(cli, "stopfile")
    assert_continued(result(cli, "stopfile", "auto"), chain["stop"]["run_dir"], chain["stop"]["step"])


def test_resume_that_changes_the_experiment_exits_2_and_leaves_the_checkpoints(cli):
    res = result(cli, "sigint", "refused")
    assert_one_error_line(res, 2, "rltrain: error: resume: `algo.lr=0.5` would change the "
                                  "experiment (algo.lr: 0.001 -> 0.5); only total_timesteps")
    run_dir = cli["sigint"]["sigint"]["run_dir"]
    assert not (run_dir / "checkpoints" / "final.pt").exists()
    assert (run_dir / "checkpoints" / "latest.pt").read_bytes() == cli["sigint"]["latest_bytes"]


def test_refused_resume_leaves_no_record_in_the_run_folder(cli):
    assert result(cli, "sigint", "traces") == []


# ---- a diverging run --------------------------------------------------------------------------

def test_diverging_run_exits_1_with_one_line_and_keeps_the_last_finite_checkpoint(cli):
    res = result(cli, "diverge")
    assert_one_error_line(res, 1, "rltrain: error: non-finite train/q_loss=nan at step 257; try ")
    latest = checkpoint.load(res["run_dir"] / "checkpoints" / "latest.pt")
    assert latest["counters"]["global_step"] == 256
    weights = latest["algo"]["q_net"]
    assert weights and all(torch.isfinite(w).all() for w in weights.values())
    assert not (res["run_dir"] / "checkpoints" / "final.pt").exists()
