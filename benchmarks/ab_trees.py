"""Time the same trainings in two source trees, interleaved, in one script: a change's speed
against the tree before it, on the same machine in the same minutes.

    git worktree add /tmp/before <rev>
    python benchmarks/ab_trees.py --before /tmp/before --after . --rounds 3

Each case runs as a fresh `python -c` process per tree and round (the tree first on
`PYTHONPATH`, `rltrain.__file__` checked), order alternating between rounds so that a slow
minute of the machine hits both; the time is the training call's own (`train()`, without the
interpreter's start-up). Prints each case's median seconds per tree and their ratio
(after / before), and writes them to `--out` as Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "ppo CartPole-v1 20k, 1 seed": ["algo=ppo", "env=CartPole-v1", "total_timesteps=20000"],
    "sac Pendulum-v1 3k, 1 seed": ["algo=sac", "env=Pendulum-v1", "total_timesteps=3000"],
    "dqn CartPole-v1 20k, 1 seed": ["algo=dqn", "env=CartPole-v1", "total_timesteps=20000"],
    "ppo CartPole-v1 20k, 8 seeds": ["algo=ppo", "env=CartPole-v1", "total_timesteps=20000",
                                     "num_seeds=8"],
    "sac Pendulum-v1 3k, 8 seeds": ["algo=sac", "env=Pendulum-v1", "total_timesteps=3000",
                                    "num_seeds=8"],
    "dqn CartPole-v1 20k, 8 seeds": ["algo=dqn", "env=CartPole-v1", "total_timesteps=20000",
                                     "num_seeds=8"],
}
COMMON = ["eval.freq=0", "logger=none", "progress=off", "torch_threads=1"]

_CHILD = """
import json, sys, tempfile, time, rltrain
from rltrain.api import train
assert rltrain.__file__.startswith(sys.argv[1]), rltrain.__file__
start = time.perf_counter()
train(json.loads(sys.argv[2]), run_dir=tempfile.mkdtemp())
print(json.dumps(time.perf_counter() - start))
"""


def run_once(tree: Path, overrides: list[str]) -> float:
    """Seconds of one training call in `tree`'s source."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tree), json.dumps(overrides)],
                         cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(overrides)} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ab_trees.md"))
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, dict[str, list[float]]] = {c: {"before": [], "after": []} for c in args.cases}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for case in args.cases:
            for side in order:
                seconds = run_once(trees[side], [*CASES[case], *COMMON])
                times[case][side].append(seconds)
                print(f"round {r + 1} {case} {side}: {seconds:.2f} s", flush=True)
    lines = [f"| case | before ({trees['before'].name}) s | after s | after / before |",
             "|---|---|---|---|"]
    for case, sides in times.items():
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        lines.append(f"| {case} | {b:.2f} | {a:.2f} | {a / b:.3f} |")
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(f"Medians of {args.rounds} interleaved rounds "
                        f"(`benchmarks/ab_trees.py`).\n\n{table}\n")


if __name__ == "__main__":
    main()
