"""Seeds as a batch (issue 16): `num_seeds=8` against one seed and against 8 runs in turn, for
each target task side by side in one run, and the return distribution of a batch against single
runs of the same seeds.

    python benchmarks/seed_batch.py                     # the three targets, 1 and 2 threads
    python benchmarks/seed_batch.py --tasks dqn:CartPole-v1:50000 --threads 1 --no-sequential
    python benchmarks/seed_batch.py --distribution 20   # + 20 seeds batched vs alone (first task)
    python benchmarks/seed_batch.py --no-speed --distribution 20 --tasks sac:Pendulum-v1:10000 \
        --dist-budget 10000 --out /tmp/sac_dist      # only the 20-seed distribution

Speed: wall-clock of the training call, in this process, one after another: one seed
(`num_seeds=1`, torch_threads=1: its fastest), `num_seeds=S` (at each `--threads`), and S
single runs in turn (measured, not extrapolated, unless `--no-sequential`). Ratios are against
the one seed measured in the same run, and are compared with the task's target (`TARGETS`);
every seed must reach the threshold (CartPole >= 475, Pendulum >= -200).

Distribution: final deterministic evals of seeds 0..N-1 trained as one batch and each alone.
Seed k's run in a batch is not bit-identical to its run alone after ~5-10 updates (see
rltrain/nets/seeded.py), so the test is that the two samples come from one distribution:
medians, IQMs and a two-sided permutation test of the means. Results go to
benchmarks/results/seed_batch.{json,md}; earlier runs and experiments: seed_batch_history.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

THRESHOLD = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0}
TARGETS = {"ppo:CartPole-v1:100000": 2.5, "sac:Pendulum-v1:20000": 3.0,
           "dqn:CartPole-v1:50000": 3.0}
"""algo:env:budget -> issue 16's target for `num_seeds=8` in multiples of one seed's time."""
EXTRA: list[str] = []
"""Overrides every run of this benchmark adds (`--device cuda`: `device=cuda`)."""


def parse_task(task: str) -> tuple[str, str, int]:
    """`algo:env:budget` -> (algo, env, budget), refusing what this benchmark cannot judge."""
    parts = task.split(":")
    if len(parts) != 3 or parts[0] not in ("ppo", "a2c", "dqn", "sac") or \
            parts[1] not in THRESHOLD or not parts[2].isdigit() or int(parts[2]) <= 0:
        raise SystemExit(f"--tasks {task!r}: write algo:env:budget with algo ppo, a2c, dqn or "
                         f"sac, env {' or '.join(sorted(THRESHOLD))}, budget > 0")
    return parts[0], parts[1], int(parts[2])


def _overrides(algo: str, env: str, budget: int, seed: int, num_seeds: int, threads: int) -> list[str]:
    """The command line of one run of this benchmark."""
    return [f"algo={algo}", f"env={env}", f"total_timesteps={budget}", f"seed={seed}",
            f"num_seeds={num_seeds}", f"torch_threads={threads}", "eval.freq=0", "logger=none",
            "progress=off", *EXTRA]


def _cfg(algo: str, env: str, budget: int, seed: int, num_seeds: int, threads: int):
    from rltrain.config.compose import compose_train_config

    return compose_train_config(_overrides(algo, env, budget, seed, num_seeds, threads))


def train_single(algo: str, env: str, budget: int, seed: int, root: Path) -> tuple[float, float]:
    """(seconds, final eval) of one ordinary run."""
    from rltrain.runner.runner import Runner

    started = time.perf_counter()
    result = Runner(_cfg(algo, env, budget, seed, 1, 1), root / f"single_{seed}").run()
    _finished(result.get("stopped"), f"{algo} {env} seed {seed}")
    return time.perf_counter() - started, float(result["mean_reward"])


def train_batch(algo: str, env: str, budget: int, seeds: int, threads: int, root: Path,
                first: int = 0) -> tuple[float, dict[int, float]]:
    """(seconds, final eval per seed) of one `num_seeds` batch."""
    from rltrain.seed_batch.runner import SeedRunner

    started = time.perf_counter()
    cfg = _cfg(algo, env, budget, first, seeds, threads)
    summary = SeedRunner(cfg, root / f"batch_{threads}").run()
    _finished(summary.get("stopped"), f"{algo} {env} num_seeds={seeds}")
    return time.perf_counter() - started, {int(s): v for s, v in summary["final_eval"].items()}


def _finished(stopped: object, what: str) -> None:
    """A run stopped before its budget (a signal, a timeout's SIGTERM) has no time to report:
    exit naming it rather than write its partial time as a result."""
    if stopped:
        raise SystemExit(f"seed_batch.py: {what} stopped early ({stopped}); no timing written")


def speed(task: str, args: argparse.Namespace, root: Path) -> dict:
    """One task's rows: one seed, the batch at each thread count, the seeds in turn."""
    algo, env, budget = parse_task(task)
    seeds, root = args.seeds, root / task.replace(":", "_")
    train_single(algo, env, 2048, 0, root / "warmup")  # imports, first-call costs: off the clock
    train_batch(algo, env, 2048, 2, 1, root / "warmup")
    one_s, one_eval = train_single(algo, env, budget, 0, root)
    rows = {"one seed": {"seconds": one_s, "evals": {0: one_eval}}}
    for threads in args.threads:
        secs, evals = train_batch(algo, env, budget, seeds, threads, root / "speed")
        rows[f"num_seeds={seeds}, {threads} thread(s)"] = {"seconds": secs, "evals": evals}
    if not args.no_sequential:
        total, evals = 0.0, {}
        for seed in range(seeds):
            secs, evals[seed] = train_single(algo, env, budget, seed, root / "sequential")
            total += secs
        rows[f"{seeds} single runs in turn"] = {"seconds": total, "evals": evals}
    for row in rows.values():
        row["ratio_to_one_seed"] = row["seconds"] / one_s
        row["all_reach_threshold"] = all(v >= THRESHOLD[env] for v in row["evals"].values())
    return rows


def distribution(task: str, args: argparse.Namespace, root: Path) -> dict:
    """Seeds F..F+N-1 of `task` (F: `--first-seed`, at `--dist-budget`) trained as one batch
    and each alone."""
    from rltrain.report.stats import iqm

    algo, env, _ = parse_task(task)
    n, first = args.distribution, args.first_seed
    _, batched = train_batch(algo, env, args.dist_budget, n, 1, root / "dist", first)
    alone = {seed: train_single(algo, env, args.dist_budget, seed, root / "dist")[1]
             for seed in range(first, first + n)}
    a, b = list(batched.values()), list(alone.values())
    return {"task": task, "seeds": n, "first_seed": first, "budget": args.dist_budget,
            "batched": batched, "alone": alone,
            "median": [statistics.median(a), statistics.median(b)],
            "iqm": [float(iqm(a)), float(iqm(b))],
            "permutation_p": permutation_p(a, b)}


def permutation_p(a: list[float], b: list[float], reps: int = 20_000) -> float:
    """Two-sided permutation test of the difference of means: the share of random relabelings
    of the pooled returns whose difference is at least the observed one."""
    import numpy as np

    pooled = np.array(a + b, dtype=np.float64)
    observed = abs(np.mean(a) - np.mean(b))
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(reps):
        perm = rng.permutation(pooled)
        hits += abs(perm[:len(a)].mean() - perm[len(a):].mean()) >= observed - 1e-12
    return (hits + 1) / (reps + 1)


def target_met(task: str, rows: dict) -> str:
    """Whether the task's fastest batch row is within its target with every seed at the
    threshold: "yes", "no (ratio R)", "no (seeds below threshold)" or "no target"."""
    target = TARGETS.get(task)
    batches = [row for name, row in rows.items() if name.startswith("num_seeds=")]
    if target is None or not batches:
        return "no target"
    best = min(batches, key=lambda row: row["ratio_to_one_seed"])
    if best["ratio_to_one_seed"] > target:
        return f"no ({best['ratio_to_one_seed']:.2f}x > {target}x)"
    return "yes" if best["all_reach_threshold"] else "no (a seed below the threshold)"


def report(results: dict, out: Path) -> str:
    """seed_batch.md (and .json) of one run: a table per task, then the distribution."""
    lines = [f"# Seeds as a batch (`benchmarks/seed_batch.py`, {results['date']})", "",
             f"Tuned presets, {results['seeds']} seeds; wall-clock of training in one process "
             f"({results['cpu']}); final eval 10 deterministic episodes. Ratios against "
             "the one seed of the same task in the same run; target: issue 16's multiple of one "
             "seed, with every seed at the threshold.", ""]
    for task, rows in results["tasks"].items():
        lines += [f"## {task} (target {TARGETS.get(task, '-')}x one seed): "
                  f"{target_met(task, rows)}", "",
                  "| run | seconds | x one seed | every seed >= threshold | final evals |",
                  "|---|---|---|---|---|"]
        for name, row in rows.items():
            evals = ", ".join(f"{v:.0f}" for v in row["evals"].values())
            lines.append(f"| {name} | {row['seconds']:.1f} | {row['ratio_to_one_seed']:.2f} | "
                         f"{'yes' if row['all_reach_threshold'] else 'no'} | {evals} |")
        lines.append("")
    dist = results.get("distribution")
    if dist:
        first = dist.get("first_seed", 0)
        lines += [f"Return distribution, {dist['task']}, seeds {first}-{first + dist['seeds'] - 1} "
                  f"at {dist['budget']:,} steps: batched median {dist['median'][0]:.1f} / IQM "
                  f"{dist['iqm'][0]:.1f}, alone median {dist['median'][1]:.1f} / IQM "
                  f"{dist['iqm'][1]:.1f}; permutation test of the means, two-sided p = "
                  f"{dist['permutation_p']:.2f}.", ""]
    lines.append("Earlier runs, profiles and experiments: `seed_batch_history.md`.")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "seed_batch.md").write_text(text)
    (out / "seed_batch.json").write_text(json.dumps(results, indent=2) + "\n")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(TARGETS), metavar="ALGO:ENV:BUDGET")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--no-sequential", action="store_true")
    parser.add_argument("--no-speed", action="store_true",
                        help="only the return distribution (with --distribution N)")
    parser.add_argument("--distribution", type=int, default=0, metavar="N",
                        help="also N seeds batched vs alone, for the first task")
    parser.add_argument("--dist-budget", type=int, default=40_000)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the distribution's seeds start here (another sample of seeds)")
    parser.add_argument("--device", default="cpu", help="the training device of every run")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    EXTRA[:] = [f"device={args.device}"]
    for task in args.tasks:
        parse_task(task)  # every task checked before the first one runs
    logging.basicConfig(level=logging.WARNING)
    results = {"date": datetime.date.today().isoformat(), "seeds": args.seeds,
               "cpu": f"{platform.machine()}, {os.cpu_count()} CPUs, load at start "
                      f"{os.getloadavg()[0]:.2f}, device {args.device}", "tasks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for task in [] if args.no_speed else args.tasks:
            results["tasks"][task] = speed(task, args, Path(tmp))
            print(f"{task}: {target_met(task, results['tasks'][task])}", flush=True)
            report(results, Path(args.out))  # each task's rows kept as soon as they exist
        if args.distribution:
            results["distribution"] = distribution(args.tasks[0], args, Path(tmp))
    print(report(results, Path(args.out)))


if __name__ == "__main__":
    main()
