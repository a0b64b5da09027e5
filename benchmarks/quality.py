"""Learning-quality benchmark: final deterministic eval per (algo, env) over seeds, with medians.

    python benchmarks/quality.py                         # every task below, seeds 0 1 2
    python benchmarks/quality.py --tasks ppo:CartPole-v1 --seeds 0 1

Each run uses the tuned preset and its budget (the issue's thresholds are listed per task), ends
with a 10-episode deterministic evaluation, and is timed wall-clock (evaluations included).
Writes benchmarks/results/quality.json and quality.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# (algo, env id) -> (env-step budget, threshold on the median final eval)
TASKS: dict[tuple[str, str], tuple[int, float]] = {
    ("ppo", "CartPole-v1"): (100_000, 475.0),
    ("ppo", "Pendulum-v1"): (100_000, -200.0),
    ("sac", "Pendulum-v1"): (20_000, -200.0),
    ("td3", "Pendulum-v1"): (20_000, -200.0),
    ("ddpg", "Pendulum-v1"): (20_000, -200.0),
    ("dqn", "CartPole-v1"): (50_000, 475.0),
    ("a2c", "CartPole-v1"): (500_000, 475.0),
}


def run_one(algo: str, env: str, seed: int, budget: int, out: Path) -> dict:
    """Train one seed with the tuned preset; returns final eval and wall-clock seconds."""
    from rltrain.api import train

    t0 = time.perf_counter()
    result = train([f"algo={algo}", f"env={env}", f"seed={seed}", f"total_timesteps={budget}",
                    "eval.episodes=10", "progress=off", "logger=none"], run_dir=out)
    return {"algo": algo, "env": env, "seed": seed, "final_eval": result["mean_reward"],
            "seconds": time.perf_counter() - t0, "budget": budget}


def summarize(runs: list[dict]) -> list[dict]:
    """Median final eval and seconds per task, with pass/fail against the threshold."""
    rows = []
    for (algo, env), (budget, threshold) in TASKS.items():
        mine = [r for r in runs if r["algo"] == algo and r["env"] == env]
        if not mine:
            continue
        median = statistics.median(r["final_eval"] for r in mine)
        rows.append({"task": f"{algo} {env}", "budget": budget, "threshold": threshold,
                     "finals": [round(r["final_eval"], 1) for r in mine],
                     "median_final": median,
                     "seconds": [round(r["seconds"], 1) for r in mine],
                     "median_seconds": statistics.median(r["seconds"] for r in mine),
                     "pass": median >= threshold})
    return rows


def markdown(rows: list[dict]) -> str:
    """The summary as a markdown table."""
    lines = ["| task | budget | per-seed final eval | median | threshold | pass | seconds (median) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['budget']:,} | {r['finals']} | {r['median_final']:.1f} | "
                     f"≥ {r['threshold']:g} | {'yes' if r['pass'] else 'NO'} | "
                     f"{r['seconds']} ({r['median_seconds']:.1f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the selected tasks and seeds sequentially; exit 1 if a median misses its threshold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=[f"{a}:{e}" for a, e in TASKS],
                        help="algo:env pairs, e.g. ppo:CartPole-v1")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    from rltrain.registry import ALGOS

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            algo, env = task.split(":")
            if algo not in ALGOS:
                print(f"skip {task}: algo {algo!r} is not available", file=sys.stderr)
                continue
            budget = TASKS[(algo, env)][0]
            for seed in args.seeds:
                run = run_one(algo, env, seed, budget, Path(tmp) / f"{algo}-{env}-{seed}")
                print(f"{algo} {env} seed {seed}: final eval {run['final_eval']:.1f} "
                      f"in {run['seconds']:.1f} s", flush=True)
                runs.append(run)
    rows = summarize(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "quality.json").write_text(json.dumps({"runs": runs, "summary": rows}, indent=2))
    (out / "quality.md").write_text(markdown(rows) + "\n")
    print(markdown(rows))
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
