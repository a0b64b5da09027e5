"""The live console, as a user sees it in a real terminal (a pseudo-terminal replayed through a
VT100 emulator), and the plain lines it logs off a terminal."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import time

import pytest

from rltrain.loggers.console import ConsoleProgress, RunStatus
from rltrain.runner.timing import SectionTimer
from tests.e2e.terminal import mixes_record_and_bar, render, rltrain_argv

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# what the terminal showed before the console had one owner (issue 17, a tmux at 120 columns)
BROKEN = ("train ━━━━━━━━━━━━━━    0/6000       - sps return - 0:00:00 ETA -:--:--[11/24/26 "
          "09:56:20] INF")


def test_the_checker_sees_a_record_printed_into_the_bar():
    assert mixes_record_and_bar(BROKEN)
    assert mixes_record_and_bar("train ━━━━━━━━ 2048/6000 ETA 0:00:02[09:56:21] INFO eval")
    assert not mixes_record_and_bar("[09:57:54] INFO     eval at step 2,048: mean reward 500.00")
    assert not mixes_record_and_bar("train ━━━━━━━━━━━━━━━━━━ 100% 6,000/6,000 4 s · ETA 0 s")


@pytest.mark.parametrize("cols", [80, 120])
def test_live_console_keeps_every_log_record_above_the_bar(tmp_path, cols):
    rc, lines = render(rltrain_argv("algo=ppo", "env=CartPole-v1", "total_timesteps=3000",
                                    "eval.freq=1000", "eval.episodes=2", "logger=none",
                                    f"hydra.run.dir={tmp_path / 'run'}"), tmp_path, cols)
    screen = "\n".join(lines)
    assert rc == 0, screen
    assert not [line for line in lines if mixes_record_and_bar(line)], screen
    assert all(len(line) <= cols for line in lines)
    # the records arrive whole, the live region is drawn once at the end, below them
    assert any("INFO" in line and "training ppo on CartPole-v1" in line for line in lines), screen
    assert sum("eval at step" in line for line in lines) == 3, screen
    bars = [i for i, line in enumerate(lines) if line.startswith("train ") and "━" in line]
    assert len(bars) == 1, screen
    panel = lines[bars[0] + 1: bars[0] + 4]
    assert "steps/s · 8 envs · return" in panel[0], screen
    assert "eval " in panel[1] and "at step 3,000" in panel[1] and "best" in panel[1], screen
    assert panel[2].startswith("  time env ") and "update" in panel[2], screen
    assert "done: 3,000 env steps" in screen.replace("\n", " ")


def test_status_lines_use_the_right_grammar_and_units():
    timer = SectionTimer()
    timer.add("env", 3.0)
    timer.add("update", 1.0)
    status = RunStatus(total=100_000, start=0, num_envs=1, timer=timer)
    status.step, status.episode_return = 12_288, 23.45
    assert " · 1 env · return 23.4 " in status.speed_line()
    assert status.eval_line() == "eval -"
    status.eval_done(412.3, 12.04, 10_000, best=450.0)
    assert status.eval_line().startswith("eval 412.3 ± 12.0 at step 10,000, 0 s ago · best 450.0")
    assert status.time_line() == "time env 75% · act 0% · update 25% · eval 0% · checkpoint 0%"
    line = status.plain_line()
    assert line.startswith("step 12,288/100,000 (12%) · ") and "ETA " in line


def test_off_a_terminal_a_plain_line_is_logged_every_interval(caplog, capsys):
    caplog.set_level(logging.INFO, logger="rltrain")
    progress = ConsoleProgress(1_000, mode="auto", interval=3600.0, num_envs=4)  # stdout: a pipe
    assert progress.mode == "plain"
    progress.update(500, 1.5)  # not due yet
    progress.update(1_000, 2.5, force=True)  # the end is always said
    progress.update(1_000, 2.5, force=True)  # ... once
    progress.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("step 1,000/1,000 (100%) · "), lines
    assert "4 envs · return 2.5" in lines[0]
    assert "━" not in capsys.readouterr().out


def test_a_compile_is_left_out_of_the_speed_and_the_eta(monkeypatch):
    """A 25 s first compile 5 s into a run made the mean speed, and the ETA with it, read
    several times too slow right after it."""
    now = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    status = RunStatus(total=10_000)
    now[0], status.step = 30.0, 5_000  # 5 s of steps at 1,000/s, then the 25 s compile
    assert status.eta() == pytest.approx(30.0)
    status.exclude(25.0)
    assert status.sps() == pytest.approx(1_000.0)
    assert status.eta() == pytest.approx(5.0)


def test_no_evaluation_and_no_best_yet_say_so():
    status = RunStatus(total=10, best=-math.inf)
    assert status.eval_line() == "eval -"
    assert status.time_line() == "time -"


def test_a_first_run_on_a_fresh_machine_does_not_report_matplotlib_building_its_font_cache(tmp_path):
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}  # no font cache yet
    env.pop("RLTRAIN_DEBUG", None)
    proc = subprocess.run(rltrain_argv("algo=ppo", "env=CartPole-v1", "total_timesteps=512",
                                       "logger=none", f"hydra.run.dir={tmp_path / 'run'}"),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "learning_curve.png").is_file()  # matplotlib did run
    assert (tmp_path / "mpl").is_dir()
    for text in (proc.stdout, proc.stderr, (tmp_path / "run" / "train.log").read_text()):
        assert "fontManager" not in text and "font cache" not in text.lower()
