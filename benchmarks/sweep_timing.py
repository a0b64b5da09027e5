"""Wall-clock of one seed sweep run serially (Hydra's basic launcher) and with joblib in parallel.

    python benchmarks/sweep_timing.py                            # 6 seeds, PPO CartPole, 20k steps
    python benchmarks/sweep_timing.py --seeds 4 --steps 10000 --n-jobs 2 4

Each mode is one `rltrain -m ... seed=0,...,N-1` command timed end to end (start-up included);
every job keeps torch at one thread. Writes benchmarks/results/sweep_timing.json and .md, with
the machine's core count and load average, since a shared machine changes the numbers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLTRAIN = Path(sys.executable).with_name("rltrain")


def time_sweep(seeds: int, steps: int, n_jobs: int | None, folder: Path) -> dict:
    """Run one seed sweep (serial when `n_jobs` is None); returns its wall-clock and results."""
    args = [str(RLTRAIN), "-m", "algo=ppo", "env=CartPole-v1", f"total_timesteps={steps}",
            f"seed={','.join(str(s) for s in range(seeds))}", "progress=off", "torch_threads=1",
            f"hydra.sweep.dir={folder}"]
    if n_jobs:
        args += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"mode": f"joblib n_jobs={n_jobs}" if n_jobs else "serial (basic launcher)",
            "jobs": seeds, "steps_per_job": steps, "wall_s": round(wall, 1),
            "load_avg_before": round(load, 2)}


def main() -> None:
    """Time every mode and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[2])
    parser.add_argument("--keep", default=None, help="keep the sweeps in this folder")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for n_jobs in [None, *args.n_jobs]:
            rows.append(time_sweep(args.seeds, args.steps, n_jobs, root / f"n_jobs_{n_jobs or 1}"))
            print(rows[-1], flush=True)
    serial = rows[0]["wall_s"]
    for row in rows:
        row["speedup"] = round(serial / row["wall_s"], 2)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    meta = {"cpu_count": os.cpu_count(), "rows": rows}
    (out / "sweep_timing.json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = [f"# Seed sweep wall-clock ({os.cpu_count()} cores), measured {datetime.date.today()}", "",
             "| mode | jobs | env steps/job | wall-clock (s) | speed-up | load avg before |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['mode']} | {r['jobs']} | {r['steps_per_job']:,} | {r['wall_s']} | "
              f"{r['speedup']}x | {r['load_avg_before']} |" for r in rows]
    (out / "sweep_timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
