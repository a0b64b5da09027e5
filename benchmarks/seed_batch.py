"""Seeds as a batch (issue 16): `num_seeds=8` against one seed and against 8 runs in turn, and
the return distribution of a batch against single runs of the same seeds.

    python benchmarks/seed_batch.py                          # speed, PPO CartPole-v1 100k
    python benchmarks/seed_batch.py --seeds 8 --threads 1 2 --budget 100000
    python benchmarks/seed_batch.py --distribution 20        # + 20 seeds batched vs alone
    python benchmarks/seed_batch.py --algo dqn --budget 50000 --threads 1
    python benchmarks/seed_batch.py --algo sac --env Pendulum-v1 --budget 20000 --threads 1
    python benchmarks/seed_batch.py --algo sac --env Pendulum-v1 --no-speed --distribution 20 \
        --dist-budget 10000 --out /tmp/sac_dist          # only the 20-seed distribution

Speed: wall-clock of the training call, in this process, one after another: one seed
(`num_seeds=1`, torch_threads=1: its fastest), `num_seeds=S` (at each `--threads`), and S
single runs in turn (measured, not extrapolated, unless `--no-sequential`). Ratios are against
the one seed measured in the same run. Every seed must reach the threshold (CartPole >= 475).

Distribution: final deterministic evals of seeds 0..N-1 trained as one batch and each alone.
Seed k's run in a batch is not bit-identical to its run alone after ~5-10 updates (see
rltrain/seeds/stacked.py), so the test is that the two samples come from one distribution:
medians, IQMs and a two-sided permutation test of the means. Results go to
benchmarks/results/seed_batch.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

THRESHOLD = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0}


ALGO = "ppo"  # set from --algo


def _cfg(env: str, budget: int, seed: int, num_seeds: int, threads: int):
    from rltrain.compose import compose_train_config

    return compose_train_config([
        f"algo={ALGO}", f"env={env}", f"total_timesteps={budget}", f"seed={seed}",
        f"num_seeds={num_seeds}", f"torch_threads={threads}", "eval.freq=0", "logger=none",
        "progress=off"])


def train_single(env: str, budget: int, seed: int, root: Path) -> tuple[float, float]:
    """(seconds, final eval) of one ordinary run."""
    from rltrain.runner.runner import Runner

    started = time.perf_counter()
    result = Runner(_cfg(env, budget, seed, 1, 1), root / f"single_{seed}").run()
    return time.perf_counter() - started, float(result["mean_reward"])


def train_batch(env: str, budget: int, seeds: int, threads: int, root: Path,
                first: int = 0) -> tuple[float, dict[int, float]]:
    """(seconds, final eval per seed) of one `num_seeds` batch."""
    from rltrain.seeds.runner import SeedRunner

    started = time.perf_counter()
    summary = SeedRunner(_cfg(env, budget, first, seeds, threads), root / f"batch_{threads}").run()
    return time.perf_counter() - started, {int(s): v for s, v in summary["final_eval"].items()}


def speed(args: argparse.Namespace, root: Path) -> dict:
    env, budget, seeds = args.env, args.budget, args.seeds
    train_single(env, 2048, 0, root / "warmup")  # imports, first-call costs: off the clock
    train_batch(env, 2048, 2, 1, root / "warmup")
    one_s, one_eval = train_single(env, budget, 0, root)
    rows = {"one seed": {"seconds": one_s, "evals": {0: one_eval}}}
    for threads in args.threads:
        secs, evals = train_batch(env, budget, seeds, threads, root / "speed")
        rows[f"num_seeds={seeds}, {threads} thread(s)"] = {"seconds": secs, "evals": evals}
    if not args.no_sequential:
        total, evals = 0.0, {}
        for seed in range(seeds):
            secs, evals[seed] = train_single(env, budget, seed, root / "sequential")
            total += secs
        rows[f"{seeds} single runs in turn"] = {"seconds": total, "evals": evals}
    for row in rows.values():
        row["ratio_to_one_seed"] = row["seconds"] / one_s
        row["all_reach_threshold"] = all(v >= THRESHOLD[env] for v in row["evals"].values())
    return rows


def distribution(args: argparse.Namespace, root: Path) -> dict:
    from rltrain.report.stats import iqm

    n = args.distribution
    _, batched = train_batch(args.env, args.dist_budget, n, 1, root / "dist")
    alone = {seed: train_single(args.env, args.dist_budget, seed, root / "dist")[1]
             for seed in range(n)}
    a, b = list(batched.values()), list(alone.values())
    return {"seeds": n, "budget": args.dist_budget, "batched": batched, "alone": alone,
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


def report(results: dict, out: Path) -> str:
    lines = [f"Seed batch benchmark ({results['date']}; {results['algo']} on {results['env']}, "
             "tuned preset, "
             f"{results['budget']:,} env steps per seed; wall-clock of training in one process, "
             "final eval 10 episodes). Ratios against the one seed of the same run.", "",
             "| run | seconds | x one seed | every seed >= threshold | final evals |",
             "|---|---|---|---|---|"]
    for name, row in results["speed"].items():
        evals = ", ".join(f"{v:.0f}" for v in row["evals"].values())
        lines.append(f"| {name} | {row['seconds']:.1f} | {row['ratio_to_one_seed']:.2f} | "
                     f"{'yes' if row['all_reach_threshold'] else 'no'} | {evals} |")
    dist = results.get("distribution")
    if dist:
        lines += ["", f"Return distribution, seeds 0-{dist['seeds'] - 1} at {dist['budget']:,} "
                  f"steps: batched median {dist['median'][0]:.1f} / IQM {dist['iqm'][0]:.1f}, "
                  f"alone median {dist['median'][1]:.1f} / IQM {dist['iqm'][1]:.1f}; "
                  f"permutation test of the means, two-sided p = {dist['permutation_p']:.2f}."]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "seed_batch.md").write_text(text)
    (out / "seed_batch.json").write_text(json.dumps(results, indent=2) + "\n")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo", choices=("ppo", "a2c", "dqn", "sac"))
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(THRESHOLD))
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--no-sequential", action="store_true")
    parser.add_argument("--no-speed", action="store_true",
                        help="only the return distribution (with --distribution N)")
    parser.add_argument("--distribution", type=int, default=0, metavar="N")
    parser.add_argument("--dist-budget", type=int, default=60_000)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    global ALGO
    ALGO = args.algo
    results = {"date": datetime.date.today().isoformat(), "algo": args.algo, "env": args.env,
               "budget": args.budget}
    with tempfile.TemporaryDirectory() as tmp:
        results["speed"] = {} if args.no_speed else speed(args, Path(tmp))
        if args.distribution:
            results["distribution"] = distribution(args, Path(tmp))
    print(report(results, Path(args.out)))


if __name__ == "__main__":
    main()
