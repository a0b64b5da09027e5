"""A tuned preset trained on each env engine, one right after the other in this process: training
seconds (evaluation off the clock) and final return, per seed, each engine named
(`env.backend=gymnasium`, then `envpool`). `auto` picks EnvPool only for ids checked equal to
gymnasium's (`envs/engines/twins.py`) from the family's measured env count; EnvPool's
LunarLander declares other observation bounds and is refused since 2026-11-27, so the default
task is PPO Hopper-v5 (a twin).

    python benchmarks/engine_presets.py                                  # PPO Hopper-v5 1M, seed 0
    python benchmarks/engine_presets.py --tasks ppo:Hopper-v5:200000 --seeds 0 1

Writes benchmarks/results/engine_presets.{json,md} after every run (rows of other tasks kept).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ENGINES = ("gymnasium", "envpool")
HARNESS = ["eval.freq=0", "eval.episodes=10", "checkpoint.freq=0", "progress=off", "logger=none",
           "torch_threads=1"]
"""The quality harness's settings (benchmarks/quality.py): the final evaluation only."""


def overrides(task: str, engine: str, seed: int) -> list[str]:
    """The command line of one run: the task's preset at its budget on `engine`."""
    algo, env, budget = parse_task(task)
    return [f"algo={algo}", f"env={env}", f"total_timesteps={budget}", f"seed={seed}",
            f"env.backend={engine}", *HARNESS]


def parse_task(task: str) -> tuple[str, str, int]:
    parts = task.split(":")
    if len(parts) != 3 or not parts[2].isdigit():
        raise SystemExit(f"--tasks {task!r}: write algo:env:budget, e.g. ppo:Hopper-v5:1000000")
    return parts[0], parts[1], int(parts[2])


def run_one(task: str, engine: str, seed: int) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from rltrain_side import timed_run

    from rltrain.config.compose import compose_train_config

    run = timed_run(compose_train_config(overrides(task, engine, seed)))
    return {"task": task, "engine": engine, "seed": seed,
            "seconds": round(run["train_seconds"], 1),
            "final": round(float(run["final"]["mean_reward"]), 1),
            "date": datetime.date.today().isoformat()}


def write(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine_presets.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Tuned presets on each env engine", "",
             f"{platform.machine()}, {os.cpu_count()} cores, one torch thread; the quality "
             "harness's settings (evaluation off the clock, final deterministic evaluation of 10 "
             "episodes); the engines of a task and seed one right after the other. "
             "`python benchmarks/engine_presets.py`.", "",
             "| task | seed | engine | training seconds | x gymnasium | final return | date |",
             "|---|---:|---|---:|---:|---:|---|"]
    base = {(r["task"], r["seed"]): r["seconds"] for r in rows if r["engine"] == "gymnasium"}
    for r in rows:
        ref = base.get((r["task"], r["seed"]))
        ratio = f"{r['seconds'] / ref:.2f}" if ref else "-"
        lines.append(f"| {r['task']} | {r['seed']} | {r['engine']} | {r['seconds']} | {ratio} | "
                     f"{r['final']} | {r['date']} |")
    (out / "engine_presets.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["ppo:Hopper-v5:1000000"])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    for task in args.tasks:
        parse_task(task)
    saved = Path(args.out) / "engine_presets.json"
    rows = [r for r in (json.loads(saved.read_text()) if saved.is_file() else [])
            if r["task"] not in args.tasks]
    for task in args.tasks:
        for seed in args.seeds:
            for engine in ENGINES:
                rows.append(run_one(task, engine, seed))
                print(json.dumps(rows[-1]), flush=True)
                write(rows, Path(args.out))


if __name__ == "__main__":
    main()
