"""Single-seed process wall-clock, rltrain against SB3 + RL-Zoo, at RL-Zoo's budgets.

    python benchmarks/process_gaps.py                                # both tasks, seeds 0-2
    python benchmarks/process_gaps.py --tasks dqn:CartPole-v1 --seeds 0 --sides rltrain

Every run is a fresh process, timed from its command to its exit after the final checkpoint:
- rltrain: the command a user types, `rltrain algo=A env=E seed=S` (the tuned preset with its
  periodic evaluations, TensorBoard events, checkpoints and final 10-episode evaluation), with
  its run folder in a temporary directory; the final eval is read from the run's metrics.csv;
- SB3: a Python process that builds RL-Zoo's settings (`sb3_side.run_sb3_final`: imports, env,
  model, `learn(budget)`), evaluates 10 deterministic episodes and saves the model, as RL-Zoo's
  train.py does at the end of a run.
Both sides use one torch thread (SB3 via `run_sb3_final`, rltrain by its default).

The target (issue 16): rltrain's median seconds <= 0.33x SB3's, with a median final eval no worse
than SB3's. Results: benchmarks/results/process_gaps.{json,md} (each run replaces its own entry).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = {"dqn:CartPole-v1": 50_000, "ppo:Pendulum-v1": 100_000}
"""algo:env -> RL-Zoo's budget (env steps)."""
SIDES = ("rltrain", "sb3")
TARGET = 0.33


def rltrain_command(task: str, seed: int, run_dir: Path) -> list[str]:
    """What a user types (`rltrain algo=A env=E seed=S`), with the run folder given."""
    algo, env = task.split(":", 1)
    return [sys.executable, "-m", "rltrain", f"algo={algo}", f"env={env}", f"seed={seed}",
            f"hydra.run.dir={run_dir}", "progress=off"]


def sb3_command(task: str, seed: int, model_path: Path) -> list[str]:
    """A process that trains SB3 with RL-Zoo's settings, evaluates, saves, prints json."""
    algo, env = task.split(":", 1)
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from sb3_side import run_sb3_final; "
            "print(json.dumps(run_sb3_final(sys.argv[2], sys.argv[3], int(sys.argv[4]), "
            "int(sys.argv[5]), save=sys.argv[6])))")
    return [sys.executable, "-c", code, str(HERE), algo, env, str(seed), str(TASKS[task]),
            str(model_path)]


def final_eval_from_metrics(path: Path) -> float:
    """The `final/eval_mean` value of a finished rltrain run's metrics.csv."""
    with path.open() as f:
        for row in csv.DictReader(f):
            if row["name"] == "final/eval_mean":
                return float(row["value"])
    raise RuntimeError(f"{path} has no final/eval_mean: the run did not finish")


def run_one(task: str, side: str, seed: int) -> dict:
    """One timed process; its wall-clock seconds and final eval."""
    with tempfile.TemporaryDirectory(prefix="rltrain-gap-") as tmp:
        folder = Path(tmp)
        cmd = (rltrain_command(task, seed, folder / "run") if side == "rltrain"
               else sb3_command(task, seed, folder / "model.zip"))
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{task} {side} seed {seed} exited {done.returncode}:\n"
                               f"{done.stderr[-2000:]}")
        if side == "rltrain":
            final = final_eval_from_metrics(folder / "run" / "metrics.csv")
        else:
            final = json.loads(done.stdout.strip().splitlines()[-1])["final_eval"]
    return {"seconds": round(seconds, 2), "final_eval": round(final, 2),
            "date": datetime.date.today().isoformat()}


def summarize(runs: dict) -> list[dict]:
    """Per task: medians of seconds and final evals per side, the time ratio, and whether both
    conditions of the target hold (None while a side has no run)."""
    rows = []
    for task in TASKS:
        sides = runs.get(task, {})
        row: dict = {"task": task, "budget": TASKS[task]}
        for side in SIDES:
            recs = list(sides.get(side, {}).values())
            row[side] = {
                "seeds": sorted(sides.get(side, {}), key=int),
                "seconds": [r["seconds"] for r in recs], "finals": [r["final_eval"] for r in recs],
                "median_seconds": statistics.median(r["seconds"] for r in recs) if recs else None,
                "median_final": statistics.median(r["final_eval"] for r in recs) if recs else None,
            }
        ours, theirs = row["rltrain"], row["sb3"]
        if ours["median_seconds"] is None or theirs["median_seconds"] is None:
            row["ratio"], row["met"] = None, None
        else:
            row["ratio"] = ours["median_seconds"] / theirs["median_seconds"]
            row["met"] = row["ratio"] <= TARGET and ours["median_final"] >= theirs["median_final"]
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    """The table of `summarize`'s rows."""
    lines = ["Process wall-clock from the command to the final checkpoint (fresh process per run, "
             "one torch thread, 2-core CPU); final eval: 10 deterministic episodes. rltrain: the "
             "tuned preset as `rltrain algo=A env=E seed=S` runs it (periodic evaluations "
             "included); SB3: RL-Zoo's settings. Target: ratio <= 0.33 at a final eval no worse "
             "than SB3's.", "",
             "| task | budget | rltrain s (median [seeds]) | rltrain final | SB3 s | SB3 final "
             "| ratio | target met |", "|---|---|---|---|---|---|---|---|"]

    def cell(values: list[float], median: float | None) -> str:
        return "missing" if median is None else f"**{median:.1f}** {values}"

    for r in rows:
        ours, theirs = r["rltrain"], r["sb3"]
        ratio = "missing" if r["ratio"] is None else f"{r['ratio']:.2f}"
        met = {None: "missing", True: "yes", False: "no"}[r["met"]]
        lines.append(f"| {r['task']} | {r['budget']:,} | "
                     f"{cell(ours['seconds'], ours['median_seconds'])} | "
                     f"{cell(ours['finals'], ours['median_final'])} | "
                     f"{cell(theirs['seconds'], theirs['median_seconds'])} | "
                     f"{cell(theirs['finals'], theirs['median_final'])} | {ratio} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--sides", nargs="*", default=list(SIDES), choices=SIDES)
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    path = out / "process_gaps.json"
    for task in args.tasks:
        for seed in args.seeds:
            for side in args.sides:
                if side == "sb3":
                    sys.path.insert(0, str(HERE))
                    from sb3_side import sb3_available
                    if not sb3_available():
                        print("skip sb3: stable-baselines3 is not installed (the bench extra)")
                        continue
                record = run_one(task, side, seed)
                print(f"{task} {side} seed {seed}: {record['seconds']:.1f} s, "
                      f"final eval {record['final_eval']:.1f}", flush=True)
                runs = json.loads(path.read_text())["runs"] if path.exists() else {}
                runs.setdefault(task, {}).setdefault(side, {})[str(seed)] = record
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"runs": runs, "summary": summarize(runs)}, indent=2)
                                + "\n")
    runs = json.loads(path.read_text())["runs"] if path.exists() else {}
    text = markdown(summarize(runs))
    (out / "process_gaps.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
