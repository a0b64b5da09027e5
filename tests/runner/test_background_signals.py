"""The evaluator process of `eval.background` under the signals that stop a run: a Ctrl-C or a
SIGTERM sent to every process of the run (as the terminal, SLURM and docker do) at each moment
of the evaluator's life stops the run as it stops without one, with no traceback and no "from
now on" line; the evaluator ends with the run, or alone when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rltrain.checkpoint import format as checkpoint
from rltrain.evaluation import background
from rltrain.runner import background_eval
from tests.e2e.harness import no_stray_signal, run_cli  # noqa: F401  (fixture)

LONG = ["algo=ppo", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=64", "algo.batch_size=64",
        "algo.n_epochs=1", "algo.hidden_sizes=[16]", "total_timesteps=1e6", "eval.freq=256",
        "eval.episodes=2", "eval.num_envs=2", "checkpoint.freq=0", "logger.log_freq=0",
        "progress=off", "eval.background=true"]
"""128 env steps an iteration, an evaluation every second one, a budget no test reaches."""
STOPS = (signal.SIGINT, signal.SIGTERM)


def held_or_ignored(pid: int) -> tuple[int, int] | None:
    """Process `pid`'s blocked and ignored signal masks (Linux `/proc`); None once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return None
    masks = dict(line.split(":\t", 1) for line in lines if line.startswith(("SigBlk", "SigIgn")))
    return int(masks["SigBlk"], 16), int(masks["SigIgn"], 16)


def bits(*signals: int) -> int:
    return sum(1 << (s - 1) for s in signals)


def default_stop_signals() -> None:
    """A parent started as from a terminal: SIGINT and SIGTERM at their defaults, whatever this
    test process inherited (a shell's background job, `cmd &`, starts with SIGINT ignored, and
    the evaluator would then look as if it ignored it from its start)."""
    for sig in STOPS:
        signal.signal(sig, signal.SIG_DFL)


def serving(pid: int) -> bool:
    """Whether the evaluator runs `_serve` (it ignores SIGINT from its first line on)."""
    masks = held_or_ignored(pid)
    return masks is not None and masks[1] & bits(signal.SIGINT) != 0


class GroupStop:
    """Sends `sig` to every process of the run, the first time the evaluator is at `moment`:
    to the evaluator, then to this process once it has handed the evaluator a snapshot after
    that (SLURM signals each process in no set order: a training process that looks at its
    evaluator before its own signal is handled must not take a stop for a failure)."""

    def __init__(self, sig: int, moment: str):
        self.sig, self.moment = sig, moment
        self.process, self.survived, self.where, self.sent = None, None, None, False

    def __call__(self, evals: background_eval.BackgroundEvals, called: str) -> None:
        ev = evals.evaluator
        if ev is None and self.process is None and not self.sent:  # it failed: end the run,
            self.sent = True                                        # which the test then fails
            os.kill(os.getpid(), self.sig)
        elif self.process is None and ev is not None and self.due(evals, ev):
            self.process, self.where = ev.process, serving(ev.process.pid)
            os.kill(ev.process.pid, self.sig)
            ev.process.join(timeout=0.3)  # time to die of it, were it to
            self.survived = ev.process.is_alive()
        elif self.process is not None and called == "submit" and not self.sent:
            self.sent = True
            os.kill(os.getpid(), self.sig)

    def due(self, evals: background_eval.BackgroundEvals, ev: background.BackgroundEvaluator) -> bool:
        returned = evals.runner.state.last_eval is not None
        if self.moment == "importing":  # the first iteration: its ~3 s of start-up just began
            return True
        if self.moment == "building":  # from `_serve`'s first line: it builds env and networks
            deadline = time.monotonic() + 60
            while not serving(ev.process.pid) and time.monotonic() < deadline:
                time.sleep(0.002)
            return True
        if self.moment == "idle":
            return returned and ev.pending is None
        return returned and ev.pending is not None  # "evaluating": one was just handed over


@pytest.mark.parametrize("sig, moment", [
    (signal.SIGINT, "importing"), (signal.SIGTERM, "importing"),  # held back (blocked)
    (signal.SIGINT, "building"), (signal.SIGTERM, "building"),    # ignored from here on
    (signal.SIGTERM, "idle"), (signal.SIGINT, "evaluating"),      # (~3 s of start-up each)
], ids=lambda v: v.name if isinstance(v, signal.Signals) else v)
def test_a_group_signal_at_any_moment_of_the_evaluator_stops_the_run_without_a_traceback(
        tmp_path, monkeypatch, capfd, no_stray_signal, sig, moment):  # noqa: F811
    stop = GroupStop(sig, moment)
    for name in ("collect", "submit"):  # the moments are seen right after each
        original = getattr(background_eval.BackgroundEvals, name)

        def hooked(self, *args, _original=original, _name=name, **kwargs):
            out = _original(self, *args, **kwargs)
            stop(self, _name)
            return out
        monkeypatch.setattr(background_eval.BackgroundEvals, name, hooked)
    run_dir = tmp_path / "run"
    res = run_cli([*LONG, f"hydra.run.dir={run_dir}"], tmp_path, monkeypatch, capfd)
    assert stop.process is not None and stop.sent, res.describe()
    assert stop.where is (moment != "importing")  # the moment aimed at was hit
    assert res.rc == 128 + sig, res.describe()
    assert f"Resume with: rltrain resume={run_dir}" in res.out + res.err, res.describe()
    assert "Traceback" not in res.out + res.err, res.describe()
    assert "from now on" not in res.out + res.err, res.describe()
    assert stop.survived, "the evaluator died of the signal the run stops on"
    step = checkpoint.load(run_dir / "checkpoints" / "latest.pt")["counters"]["global_step"]
    assert step >= 128 and step % 128 == 0
    stop.process.join(timeout=5)
    assert stop.process.exitcode in (0, -signal.SIGKILL)  # told to end, or killed while starting


SCRIPT = """
import sys, time
from rltrain.config.compose import compose_train_config
from rltrain.config.schema import config_to_dict
from rltrain.evaluation.background import BackgroundEvaluator
evaluator = BackgroundEvaluator(config_to_dict(compose_train_config(sys.argv[1:])))
print(evaluator.process.pid, flush=True)
time.sleep(600)
"""


def test_the_evaluator_holds_stop_signals_from_its_start_and_ends_when_its_parent_is_killed(
        tmp_path):
    """A real parent (it is SIGKILLed): the evaluator's SIGINT and SIGTERM are blocked or
    ignored at every look from its start on, and it ends on its own after its parent's death."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        parent = subprocess.Popen([sys.executable, "-c", SCRIPT, *LONG], stdout=subprocess.PIPE,
                                  stderr=stderr, text=True, cwd=tmp_path,
                                  preexec_fn=default_stop_signals)
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), err.read_text()
        pid = int(line)
        looks, deadline = [], time.monotonic() + 120
        while not serving(pid) and time.monotonic() < deadline:
            looks.append(held_or_ignored(pid))
            if len(looks) == 1:  # while Python starts (it imports torch next)
                os.kill(pid, signal.SIGINT)
                os.kill(pid, signal.SIGTERM)
            time.sleep(0.005)
        assert serving(pid) and looks and None not in looks, err.read_text()
        stops = bits(*STOPS)
        assert all((blocked | ignored) & stops == stops for blocked, ignored in looks), looks
        parent.kill()
        parent.wait()
        gone = time.monotonic() + background.PARENT_CHECK_S + 10
        while held_or_ignored(pid) is not None and time.monotonic() < gone:
            time.sleep(0.05)
        assert held_or_ignored(pid) is None, "the evaluator outlived its parent"
        assert "Traceback" not in err.read_text(), err.read_text()
    finally:
        parent.kill()
        parent.wait()


def fake_evals(background_setting: str = "true", freq: int = 256, ranks: int = 1,
               allowed: bool = True, rebuildable: bool = True,
               stopping: bool = False) -> background_eval.BackgroundEvals:
    """`BackgroundEvals` of a stand-in runner with just what `declined` and `_failed` read."""
    cfg = SimpleNamespace(eval=SimpleNamespace(background=background_setting, freq=freq))
    runner = SimpleNamespace(cfg=cfg, collective=SimpleNamespace(world=SimpleNamespace(size=ranks)),
                             stopper=SimpleNamespace(requested=lambda: stopping))
    return background_eval.BackgroundEvals(runner, rebuildable, allowed)


@pytest.mark.parametrize("stopping, said", [(False, True), (True, False)])
def test_an_evaluator_ending_while_the_run_stops_is_no_failure_to_tell(caplog, stopping, said):
    fake_evals(stopping=stopping)._failed(background.EvaluatorFailed("killed"))
    lines = [r.getMessage() for r in caplog.records if "from now on" in r.getMessage()]
    assert lines == (["background evaluation stopped (killed): evaluating in the training "
                      "process from now on"] if said else [])


@pytest.mark.parametrize("kwargs, why", [
    ({"ranks": 2}, "a torchrun job"),
    ({"allowed": False}, "a seed batch"),
    ({"rebuildable": False}, "an algorithm built in Python"),
    ({}, None),
    ({"background_setting": "auto", "ranks": 2}, None),   # auto decides quietly
    ({"freq": 0, "allowed": False}, None),                 # no periodic evaluations to place
])
def test_why_an_explicit_background_true_is_not_followed(kwargs, why):
    declined = fake_evals(**kwargs).declined()
    assert declined is None if why is None else declined.startswith(why), declined


def test_a_seed_batch_says_once_that_it_evaluates_in_the_training_process(
        tmp_path, monkeypatch, capfd):
    def refuse(*args, **kwargs):
        raise AssertionError("a seed batch started an evaluator process")
    monkeypatch.setattr(background_eval, "BackgroundEvaluator", refuse)
    res = run_cli(["algo=ppo", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=32",
                   "algo.batch_size=64", "algo.hidden_sizes=[8]", "total_timesteps=128",
                   "eval.freq=64", "eval.episodes=2", "eval.num_envs=2", "logger=none",
                   "progress=off", "eval.background=true", "num_seeds=3",
                   f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    said = [line for line in (res.out + res.err).splitlines() if "in the training process" in line]
    assert len(said) == 1, res.describe()
    assert "periodic evaluations run in the training process in a seed batch" in said[0]
