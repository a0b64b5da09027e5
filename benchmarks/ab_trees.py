"""Time the same trainings in two source trees, interleaved, in one script: a change's speed
against the tree before it, on the same machine in the same minutes.

    git worktree add /tmp/before <rev>
    python benchmarks/ab_trees.py --before /tmp/before --after . --rounds 3

Each case runs as a fresh `python -c` process per tree and round (the tree first on
`PYTHONPATH`, `rltrain.__file__` checked), order alternating between rounds so that a slow
minute of the machine hits both; the time is the training call's own (`train()`, without the
interpreter's start-up), and of the loop's rollout and update sections in it. Prints each case's
median seconds per tree and section and their ratio
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
    "ppo collection CartPole-v1, 1 env": ["collection", "CartPole-v1", "1"],
    "ppo collection CartPole-v1, 16 envs": ["collection", "CartPole-v1", "16"],
}
"""A case is a training's overrides, or `["collection", env, num_envs]`: `speed.py`'s
throughput row of the on-policy loop's rollouts (`rltrain_side.collection_sps`, this checkout's
benchmark code driving each tree's rltrain), reported in µs per env step."""
COMMON = ["eval.freq=0", "logger=none", "progress=off", "torch_threads=1"]

_CHILD = """
import json, sys, tempfile, time, rltrain
from rltrain.api import train
assert rltrain.__file__.startswith(sys.argv[1]), rltrain.__file__
sections, opened = {"rollout": 0.0, "update": 0.0}, {}
def mark(name, phase):
    def hook(state):
        now = time.perf_counter()
        if phase == "pre":
            opened[name] = now
        else:
            sections[name] += now - opened.pop(name)
    return hook
overrides = json.loads(sys.argv[2])
# a seed batch takes no callbacks (train() refuses them with num_seeds > 1): its total only
batch = any(o.startswith("num_seeds=") and o != "num_seeds=1" for o in overrides)
hooks = None if batch else {f"{p}_{n}": [mark(n, p)] for n in sections for p in ("pre", "post")}
start = time.perf_counter()
train(overrides, run_dir=tempfile.mkdtemp(), callbacks=hooks)
if batch:
    sections = {}
print(json.dumps({"total s": time.perf_counter() - start,
                  **{f"{k} s": v for k, v in sections.items()}}))
"""
_COLLECTION = """
import json, sys, torch, rltrain
sys.path.insert(0, sys.argv[3])
import rltrain_side
assert rltrain.__file__.startswith(sys.argv[1]), rltrain.__file__
torch.set_num_threads(1)
env, num_envs = json.loads(sys.argv[2])[1:3]
sps = rltrain_side.collection_sps(env, int(num_envs), seconds=3.0)
print(json.dumps({"collect µs/env step": 1e6 / sps}))
"""
"""What each training reports: the call's seconds, and the loop's own sections inside it, timed
by callbacks (`pre_rollout` to `post_rollout`: acting, env steps and storage; `pre_update`
to `post_update`: the gradient steps), so a per-env-step cost shows apart from the update's."""


def run_once(tree: Path, overrides: list[str]) -> dict[str, float]:
    """What one case measures in `tree`'s source: a training's seconds and its loop sections',
    or a collection row's µs per env step."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    child = _COLLECTION if overrides[0] == "collection" else _CHILD
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", child, str(tree), json.dumps(overrides), here],
                         cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(overrides)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ab_trees.md"))
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, dict[str, list[dict[str, float]]]] = {
        c: {"before": [], "after": []} for c in args.cases}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for case in args.cases:
            for side in order:
                measured = run_once(trees[side], [*CASES[case], *COMMON])
                times[case][side].append(measured)
                print(f"round {r + 1} {case} {side}: " + ", ".join(
                    f"{k} {v:.2f}" for k, v in measured.items()), flush=True)
    lines = [f"| case | measure | before ({trees['before'].name}) | after | after / before |",
             "|---|---|---|---|---|"]
    for case, sides in times.items():
        for section in sides["before"][0]:
            b, a = (statistics.median(run[section] for run in sides[side])
                    for side in ("before", "after"))
            lines.append(f"| {case} | {section} | {b:.2f} | {a:.2f} | "
                         f"{a / b if b > 0 else float('nan'):.3f} |")
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(f"Medians of {args.rounds} interleaved rounds "
                        f"(`benchmarks/ab_trees.py`).\n\n{table}\n")


if __name__ == "__main__":
    main()
