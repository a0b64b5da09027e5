"""Periodic evaluations in the training process or in a second one (`eval.background`): a user's
run with the default evaluation settings, whole-process wall-clock and final return, one setting
right after the other, on this machine.

    python benchmarks/background_eval.py                                   # SAC HalfCheetah 100k
    python benchmarks/background_eval.py --tasks ppo:LunarLander-v3:1000000 sac:HalfCheetah-v5:100000

Writes benchmarks/results/background_eval.{json,md} after every run, keeping the rows of tasks
not run this time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLTRAIN = [sys.executable, "-m", "rltrain"]
DONE = re.compile(r"done: ([\d,]+) env steps; eval mean reward (-?[\d.]+)")


def one(task: str, setting: str) -> dict:
    algo, env, budget = task.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        argv = [*RLTRAIN, f"algo={algo}", f"env={env}", f"total_timesteps={budget}",
                f"eval.background={setting}", "progress=plain", f"hydra.run.dir={tmp}/run"]
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True,
                              env={**os.environ, "SDL_VIDEODRIVER": "dummy"})
        seconds = time.perf_counter() - start
        text = proc.stdout + proc.stderr
        done = DONE.search(text)
        evals = len(re.findall(r"eval at step", text))
        skipped = "is skipped" in text
    return {"task": task, "background": setting, "rc": proc.returncode,
            "seconds": round(seconds, 1), "final": float(done.group(2)) if done else None,
            "evaluations": evals, "skipped_one": skipped,
            "tail": None if proc.returncode == 0 else text[-1500:]}


def write(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "background_eval.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Periodic evaluations in the training process or beside it", "",
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}; default evaluation settings "
             "(`eval.freq=10000`, 10 episodes), seed 0; whole process, start-up included. "
             "`python benchmarks/background_eval.py`.", "",
             "| task | eval.background | seconds | x in-process | final return | evaluations logged |",
             "|---|---|---:|---:|---:|---:|"]
    base = {r["task"]: r["seconds"] for r in rows if r["background"] == "false"}
    for r in rows:
        ratio = f"{r['seconds'] / base[r['task']]:.2f}" if r["task"] in base else "-"
        lines.append(f"| {r['task']} | {r['background']} | {r['seconds']} | {ratio} | "
                     f"{r['final']} | {r['evaluations']}{' (one skipped)' if r['skipped_one'] else ''} |")
    (out / "background_eval.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["sac:HalfCheetah-v5:100000"])
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    saved = Path(args.out) / "background_eval.json"  # other tasks' rows are kept
    rows = [r for r in (json.loads(saved.read_text()) if saved.is_file() else [])
            if r["task"] not in args.tasks]
    for task in args.tasks:
        for setting in ("false", "true"):
            rows.append(one(task, setting))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "tail"}), flush=True)
            write(rows, Path(args.out))


if __name__ == "__main__":
    main()
