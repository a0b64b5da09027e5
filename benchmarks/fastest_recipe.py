"""The fastest recipe: for each env of ENVS, the least training time in which any rltrain row of
the quality benchmark reaches the SB3 + RL-Zoo median return, beside SB3 + contrib's and SBX's
fastest rows to the same return.

    python benchmarks/fastest_recipe.py [--out benchmarks/results]   # reads quality.json

- The target is the env's best SB3 + RL-Zoo row: the highest median final eval among its rows
  run with SB3 itself (not SB3-contrib) on RL-Zoo's settings.
- A row reaches the target when its median final eval (over at least MIN_SEEDS seeds) is at or
  above it; its time is its median training seconds.
- Quality runs evaluate only at the end of their budget, so each time is an upper bound: the
  row's whole run, not the moment it first reached the return.
- SBX rows are quality.py's `sbx` side (`--sides sbx` from `.venv-sbx`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality  # noqa: E402
from results_io import report  # noqa: E402
from sb3_side import CONTRIB  # noqa: E402

ENVS = ("Hopper-v5", "HalfCheetah-v5", "LunarLander-v3", "LunarLanderContinuous-v3")
MIN_SEEDS = 3
# Rows whose algorithm is in sb3_side.CONTRIB ran SB3-contrib on their SB3 side: they compete for
# the fastest time and never set the target.
SIDES = {"rltrain": "rltrain", "sb3": "SB3 + contrib", "sbx": "SBX"}


def row_stats(runs: dict) -> dict | None:
    """Median final eval and training seconds of one side's seed records; None with too few."""
    if len(runs) < MIN_SEEDS:
        return None
    return {"median_final": statistics.median(r["final_eval"] for r in runs.values()),
            "median_seconds": statistics.median(r["seconds"] for r in runs.values()),
            "seeds": len(runs), "budget": next(iter(runs.values())).get("budget")}


def rows_of(results: dict, env: str, side: str) -> dict[str, dict]:
    """`{task: stats}` for `side`'s rows on `env` that ran enough seeds."""
    out = {}
    for task, sides in results.get("runs", {}).items():
        if task.partition(":")[2] != env:
            continue
        stats = row_stats(sides.get(side, {}))
        if stats is not None:
            out[task] = stats
    return out


def target_of(results: dict, env: str) -> tuple[str, float] | None:
    """The env's best SB3 + RL-Zoo row (SB3 itself, not contrib) and its median final eval."""
    sb3 = {task: s for task, s in rows_of(results, env, "sb3").items()
           if task.partition(":")[0] not in CONTRIB}
    if not sb3:
        return None
    task = max(sb3, key=lambda t: sb3[t]["median_final"])
    return task, sb3[task]["median_final"]


def fastest(results: dict, env: str, side: str, target: float) -> dict | None:
    """The row of `side` on `env` that reaches `target` in the least median seconds."""
    reached = {task: s for task, s in rows_of(results, env, side).items()
               if s["median_final"] >= target}
    if not reached:
        return None
    task = min(reached, key=lambda t: reached[t]["median_seconds"])
    return {"task": task, **reached[task]}


def summarize(results: dict) -> list[dict]:
    """One entry per env of ENVS: the target and each side's fastest row (None: none reaches
    it, or none ran) with the rows it was chosen from."""
    table = []
    for env in ENVS:
        entry: dict = {"env": env, "target": None, "sides": {}, "ran": {}}
        target = target_of(results, env)
        if target is not None:
            entry["target"] = {"task": target[0], "return": target[1]}
            for side in SIDES:
                entry["sides"][side] = fastest(results, env, side, target[1])
                entry["ran"][side] = sorted(rows_of(results, env, side))
        table.append(entry)
    return table


def _cell(best: dict | None, ran: list[str]) -> str:
    if best is not None:
        return (f"{best['task'].partition(':')[0]}: {best['median_final']:.1f} in "
                f"≤ {best['median_seconds']:,.0f} s ({best['budget']:,} steps)")
    return "none reaches it (ran: " + ", ".join(ran) + ")" if ran else "not run"


def markdown(table: list[dict]) -> str:
    lines = [
        "# Fastest recipe to SB3 + RL-Zoo's return",
        "",
        "`python benchmarks/fastest_recipe.py`, from `quality.json`. Target: the env's best "
        "SB3 + RL-Zoo row (SB3 itself, RL-Zoo's settings, median of its seeds). Each side: its "
        f"row that reaches the target (median final eval over ≥ {MIN_SEEDS} seeds) in the least "
        "median training seconds. Quality runs evaluate only at the end of their budget, so a "
        "time is an upper bound (the whole run, not the moment the return was first reached).",
        "",
        "| env | target (SB3 + RL-Zoo row) | rltrain | SB3 + contrib | SBX | rltrain / SB3 |",
        "|---|---|---|---|---|---|",
    ]
    for e in table:
        if e["target"] is None:
            lines.append(f"| {e['env']} | no SB3 row with {MIN_SEEDS} seeds | | | | |")
            continue
        cells = [_cell(e["sides"][side], e["ran"][side]) for side in SIDES]
        ours, theirs = e["sides"]["rltrain"], e["sides"]["sb3"]
        ratio = (f"{ours['median_seconds'] / theirs['median_seconds']:.2f}"
                 if ours and theirs else "—")
        target = f"{e['target']['return']:.1f} ({e['target']['task'].partition(':')[0]})"
        lines.append(f"| {e['env']} | {target} | {' | '.join(cells)} | {ratio} |")
    return "\n".join(lines) + "\n"


QUALITY_ONLY = ("seed=", "eval.", "checkpoint.freq=", "progress=", "logger=")
"""Overrides of a quality run that only serve the measurement (left out of a user's command)."""


def command(task: str) -> str:
    """The command line that trains `task`'s rltrain row, as the quality run trained it."""
    algo, env = quality.parse_task(task)
    kept = [a for a in quality.rltrain_overrides(algo, env, 0) if not a.startswith(QUALITY_ONLY)]
    return "rltrain " + " ".join(kept)


def readme_rows(table: list[dict]) -> list[str]:
    """The README's fastest-recipe table: per env the return to reach, rltrain's command and
    time, and the other sides' fastest rows (this file's rows, shorter)."""
    rows = ["| env | return to reach (SB3 + RL-Zoo) | rltrain's fastest | time | SB3 + contrib | "
            "SBX |", "|---|---|---|---|---|---|"]
    for e in table:
        if e["target"] is None:
            continue
        target = (f"{e['target']['return']:,.1f} "
                  f"({e['target']['task'].partition(':')[0].upper()})")
        ours = e["sides"]["rltrain"]
        mine = (f"`{command(ours['task'])}` | {ours['median_seconds']:,.0f} s" if ours
                else "none reaches it | —")
        others = [f"{best['task'].partition(':')[0].upper()}, {best['median_seconds']:,.0f} s"
                  if best else ("not run" if not e["ran"][side] else "none reaches it")
                  for side, best in ((s, e["sides"][s]) for s in ("sb3", "sbx"))]
        rows.append(f"| {e['env']} | {target} | {mine} | {' | '.join(others)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", default="benchmarks/results/quality.json")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    path = Path(args.quality)
    if not path.is_file():
        raise SystemExit(f"{path} not found: run benchmarks/quality.py first")
    table = summarize(json.loads(path.read_text()))
    report("fastest_recipe", table, markdown(table), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
