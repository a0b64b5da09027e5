"""Run `rltrain` in-process with an argv list and check how it refused bad input.

The bad-input tables (`test_bad_values.py`, `test_trust.py`) call `run_cli` for every case: the
same code path as the installed command, without paying Python + torch start-up per case.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

EXIT_USAGE, EXIT_TRAINING = 2, 1


@dataclass
class CliResult:
    """What one in-process `rltrain` call produced."""

    rc: int
    out: str
    err: str

    def describe(self) -> str:
        return f"rc={self.rc}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}"


def run_cli(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch,
            capfd: pytest.CaptureFixture[str]) -> CliResult:
    """`rltrain <argv>` in `cwd`, as the console script runs it; never raises SystemExit."""
    from rltrain.cli import main

    monkeypatch.delenv("RLTRAIN_DEBUG", raising=False)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["rltrain", *argv])
    capfd.readouterr()  # drop what earlier steps of the test printed
    try:
        main()
        rc = 0
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capfd.readouterr()
    return CliResult(rc, out, err)


def assert_refused(result: CliResult, rc: int, fragment: str = "") -> None:
    """Exit code `rc`, at most two lines on stderr (the error first), no traceback anywhere."""
    assert result.rc == rc, result.describe()
    assert "Traceback" not in result.out + result.err, result.describe()
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("rltrain: error: ")]
    assert errors, result.describe()
    assert len(lines) <= 2, result.describe()
    assert fragment.lower() in errors[0].lower(), f"{fragment!r} not in {errors[0]!r}"


def tree(folder: Path) -> set[str]:
    """Every path below `folder`, relative, so a test can say 'nothing was written here'."""
    if not folder.exists():
        return set()
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def marker_env(folder: Path) -> dict[str, str]:
    """Environment for subprocesses: headless, tracebacks off."""
    env = {k: v for k, v in os.environ.items() if k != "RLTRAIN_DEBUG"}
    env["SDL_VIDEODRIVER"] = "dummy"
    return env


@pytest.fixture
def no_stray_signal():
    """A SIGINT or SIGTERM that reaches no rltrain handler fails the test instead of ending
    pytest (for tests that signal their own process from inside a run)."""
    import signal

    def stray(signum, frame):
        raise AssertionError(f"{signal.Signals(signum).name} reached no rltrain handler")

    before = {s: signal.signal(s, stray) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)
