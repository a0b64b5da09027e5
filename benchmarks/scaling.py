"""Data-parallel scaling under torchrun: PPO with 1 rank against 2 ranks at the same per-rank
settings (weak scaling), side by side in one run, plus the cost of the gradient all-reduce.

    python benchmarks/scaling.py                                  # LunarLander-v3, 1 vs 2 ranks
    python benchmarks/scaling.py --env HalfCheetah-v5 --steps 131072 --variants "preset"

Two settings by default: the tuned preset (minibatches of 64: 1,024 optimizer steps, so 1,024
all-reduces, per 16,384-step rollout of each rank) and the same with minibatches of 1,024
(64 per rollout), where the envs, not the all-reduces, take most of the time.

Each configuration is a real `torchrun --standalone -m rltrain` process (gloo on CPU) training
`--steps` env steps per rank; env steps/s is the run's env steps over its training seconds
(process start and the final evaluation excluded: `final/wall_clock_s`), beside the final
deterministic return (10 episodes). The all-reduce cost is the mean time of one flat
all-reduce of the PPO networks' gradients between 2 ranks (`ProcessGroup.average_`), measured
by `scaling_allreduce.py` under torchrun. Writes benchmarks/results/scaling.{json,md}.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.6  # env steps/s of 2 ranks over 1 rank


def run(env: str, ranks: int, steps: int, seed: int, extra: list[str]) -> dict[str, Any]:
    """One torchrun training run; its env steps/s and final return."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={ranks}", "-m", "rltrain", "algo=ppo", f"env={env}",
               f"total_timesteps={steps * ranks}", f"seed={seed}", "logger=none",
               "progress=off", "checkpoint.freq=0", "eval.freq=0", "eval.episodes=10",
               f"hydra.run.dir={tmp}/run", *extra]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        if done.returncode != 0:
            raise SystemExit(f"ranks={ranks} failed:\n{done.stderr[-3000:]}")
        values: dict[str, float] = {}
        with open(Path(tmp) / "run" / "metrics.csv") as f:
            for row in csv.DictReader(f):
                values[row["name"]] = float(row["value"])
    seconds = values["final/wall_clock_s"]
    return {"ranks": ranks, "env_steps": int(values["final/env_steps"]), "seconds": seconds,
            "steps_per_s": values["final/env_steps"] / seconds,
            "final_return": values["final/eval_mean"]}


def allreduce_cost(env: str) -> dict[str, float]:
    """Mean microseconds of one gradient all-reduce between 2 ranks (`scaling_allreduce.py`)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cost.json"
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
             str(ROOT / "benchmarks" / "scaling_allreduce.py"), env, str(out)],
            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                         "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            raise SystemExit(f"all-reduce probe failed:\n{done.stderr[-3000:]}")
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="LunarLander-v3")
    parser.add_argument("--steps", type=int, default=131072, help="env steps per rank")
    parser.add_argument("--ranks", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--variants", nargs="*", default=["preset", "algo.batch_size=1024"],
                        help="settings to compare: 'preset', or overrides separated by spaces")
    args = parser.parse_args(argv)
    rows = []
    for variant in args.variants:
        extra = [] if variant == "preset" else variant.split()
        runs = [run(args.env, r, args.steps, args.seed, extra) for r in args.ranks]
        for row in runs:
            row["settings"], row["speedup"] = variant, row["steps_per_s"] / runs[0]["steps_per_s"]
        rows += runs
    cost = allreduce_cost(args.env)
    result = {"env": args.env, "steps_per_rank": args.steps, "rows": rows, "allreduce": cost,
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(result, indent=2))
    lines = [f"PPO on {args.env} under torchrun (gloo, CPU), {args.steps:,} env steps per rank, "
             f"seed {args.seed}, {result['machine']}; target: 2 ranks >= {TARGET}x the env "
             f"steps/s of 1.", "",
             "| settings | ranks | env steps | training s | env steps/s | speedup | final return |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['settings']} | {r['ranks']} | {r['env_steps']:,} | {r['seconds']:.1f} | "
              f"{r['steps_per_s']:,.0f} | {r['speedup']:.2f}x | {r['final_return']:.1f} |"
              for r in rows]
    lines += ["", f"Gradient all-reduce between 2 ranks ({cost['numel']:,} float32 values, one "
                  f"flat tensor): {cost['us_per_call']:.0f} µs per optimizer step "
                  f"(mean of {cost['calls']:,} calls)."]
    (out / "scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
