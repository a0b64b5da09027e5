"""Run a command under a pseudo-terminal of a given size and return what a user would see.

The raw bytes (colours, cursor moves, line erases of rich's live display) are replayed through
`pyte`, a VT100 emulator, so a test reads the rendered lines: the scrollback that left the screen
followed by the final screen. A log record printed into the middle of a progress bar shows up
here exactly as it does in tmux.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte

BAR_MARKS = ("━", "ETA", "steps/s")
"""Text that only the live region (bar, status panel) prints."""
RECORD = re.compile(r"\[(\d\d/\d\d/\d\d )?\d\d:\d\d:\d\d\]|\b(INFO|WARNING|ERROR)\b")
"""What only a log record prints (rich's handler: `[time] LEVEL message`)."""


def mixes_record_and_bar(line: str) -> bool:
    """True when one rendered line holds both a log record and a piece of the live region."""
    return bool(RECORD.search(line)) and any(m in line for m in BAR_MARKS)


def render(argv: list[str], cwd: Path, cols: int, rows: int = 40, timeout: float = 120.0,
           env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run `argv` in `cwd` on a `cols` x `rows` pseudo-terminal; (exit code, rendered lines)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {**os.environ, "COLUMNS": str(cols), "LINES": str(rows), "TERM": "xterm-256color",
                **(env or {})}
    full_env.pop("NO_COLOR", None)
    proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=full_env,
                            close_fds=True)
    os.close(slave)
    raw = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            raw += chunk
        elif proc.poll() is not None:
            break
    else:
        proc.kill()
    rc = proc.wait()
    os.close(master)
    screen = pyte.HistoryScreen(cols, rows, history=100_000)
    stream = pyte.ByteStream(screen)
    stream.feed(bytes(raw))  # the terminal turned each "\n" into "\r\n" (onlcr)
    history = ["".join(char.data for char in line.values()).rstrip()
               for line in _history_lines(screen)]
    lines = [*history, *(line.rstrip() for line in screen.display)]
    while lines and not lines[-1]:
        lines.pop()
    return rc, lines


def _history_lines(screen: pyte.HistoryScreen) -> list[dict]:
    """The lines that scrolled off the top, as dicts of column -> char, padded to the width."""
    out = []
    for line in screen.history.top:
        out.append({x: line[x] for x in sorted(line)} if line else {})
    return out


def rltrain_argv(*overrides: str) -> list[str]:
    """`rltrain <overrides>` through this interpreter (the installed script's entry point)."""
    return [sys.executable, "-c", "from rltrain.cli import main; main()", *overrides]
