"""Checkpoint writes killed with SIGKILL at random moments never cost the previous checkpoint.

One helper process pays the torch import once, then per round forks a writer that saves a
4 MB checkpoint in a loop (about 15 ms a save) and reports each finished save; the test kills
the writer at a random moment, then checks what is on disk.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from rltrain.checkpoint import format as checkpoint

ROUNDS = 8

# Reads a first counter per stdin line, forks a writer counting up from it, prints
# `child <pid>`, `saved <n>` after each save returns (from the writer), and `dead <signal>`.
WRITER_FACTORY = r"""
import os, sys
from rltrain.checkpoint import format as checkpoint

def write_forever(path, n):
    import torch
    torch.set_num_threads(1)
    data = torch.empty(1_000_000)  # 4 MB
    while True:
        data.fill_(float(n))
        checkpoint.save({"config": {}, "counters": {"n": n}, "data": data}, path)
        os.write(1, f"saved {n}\n".encode())
        n += 1

os.write(1, b"ready\n")
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            write_forever(sys.argv[1], int(line))
        finally:
            os._exit(1)
    os.write(1, f"child {pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(1, f"dead {os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1}\n".encode())
"""


def read_until(proc: subprocess.Popen, word: str, saved: list[int]) -> str:
    """Read lines up to the first one starting with `word` and return its value; the counters
    of `saved <n>` lines read on the way are appended to `saved`."""
    while True:
        line = proc.stdout.readline()
        assert line, f"writer factory ended early (rc={proc.poll()})"
        key, _, value = line.strip().partition(" ")
        if key == "saved":
            saved.append(int(value))
        if key == word:
            return value


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_checkpoint_killed_mid_save_leaves_the_previous_one_loadable(tmp_path):
    path = tmp_path / "checkpoints" / "latest.pt"
    proc = subprocess.Popen([sys.executable, "-c", WRITER_FACTORY, str(path)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)
    rng = random.Random(0)
    last, mid_save_kills = -1, 0
    try:
        read_until(proc, "ready", [])
        for _ in range(ROUNDS):
            proc.stdin.write(f"{last + 1}\n")
            proc.stdin.flush()
            saved: list[int] = []
            pid = int(read_until(proc, "child", saved))
            read_until(proc, "saved", saved)  # one whole save this round, then a random moment:
            time.sleep(rng.uniform(0.0, 0.05))  # most of a writer's time is spent inside `save`
            os.kill(pid, signal.SIGKILL)
            assert int(read_until(proc, "dead", saved)) == signal.SIGKILL

            payload = checkpoint.load(path)  # never raises: the old file or the new one, whole
            n = payload["counters"]["n"]
            # the newest save that returned, or the next one if the kill came right after rename
            assert n in (saved[-1], saved[-1] + 1), (n, saved[-1])
            assert n > last and torch.equal(payload["data"], torch.full((1_000_000,), float(n)))
            last = n
            files = sorted(p.name for p in path.parent.iterdir())
            assert [f for f in files if not f.startswith(".latest.pt.tmp")] == ["latest.pt"]
            mid_save_kills += len(files) > 1
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert mid_save_kills > 0, "no kill landed inside a save"
    checkpoint.save({"config": {}, "counters": {"n": last + 1}}, path)
    # the next save deletes the temp files of the killed writers
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest.pt"]
