"""The arithmetic floor of a seed batch: the matrix products of its stacked updates alone, over
the run's budget, against the target of `seed_batch.py` (8 seeds in at most 2.5x one seed).

    python benchmarks/seed_batch_floor.py                     # PPO CartPole 100k, DQN CartPole 50k
    python benchmarks/seed_batch_floor.py --tasks dqn:CartPole-v1:50000 --seeds 8

For each task, a single run and a `num_seeds` batch of its preset (seed_batch.py's command line,
one torch thread) are each stopped at their first update. That update's products (`aten::mm`,
`addmm`, `bmm`, `baddbmm` and convolutions: update_floor.py's list) are replayed alone on random
inputs of the same shapes, and multiplied by the updates the budget holds. The single run is also
trained whole and timed, final evaluation included, as seed_batch.py times it. `floor x one seed`:
the batch's products over the budget / that one seed's whole run. Where it reaches the target, no
implementation of the same stacked networks and update count meets the target at one thread on
this CPU, whatever it does about envs and Python; below it, the rest of the batch's time (envs,
elementwise ops, Python) is what stands between the two. Results: benchmarks/results/
seed_batch_floor.{json,md} (a task measured again replaces its row).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import seed_batch  # noqa: E402 - the tasks, presets and timed single run of the seed-batch benchmark
import update_floor  # noqa: E402 - the products of one update, and their replay

RESULTS = Path(__file__).parent / "results"
DEFAULT_TASKS = ("ppo:CartPole-v1:100000", "dqn:CartPole-v1:50000")
TARGET = 2.5
"""Issue 46's target for 8 seeds, in multiples of one seed's whole run."""


class _Caught(Exception):
    """Raised out of a run once its first update's inputs are kept."""


def first_update(algo: str, env: str, budget: int, seeds: int, root: Path) -> tuple[Any, tuple, dict, Any]:
    """(the algorithm, its first update's args and kwargs, the run's config) of the task's preset
    run as one seed (`seeds=1`) or as a `num_seeds` batch, stopped at that update (off-policy
    runs start learning after at most 1,000 steps)."""
    from rltrain.config.compose import compose_train_config
    from rltrain.runner.runner import Runner
    from rltrain.seed_batch.runner import SeedRunner

    cfg = seed_batch._cfg(algo, env, budget, 0, seeds, 1)
    if hasattr(cfg.algo, "learning_starts") and cfg.algo.learning_starts > 1000:
        cfg = compose_train_config([*seed_batch._overrides(algo, env, budget, 0, seeds, 1),
                                    "algo.learning_starts=1000"])
    kept: dict[str, Any] = {}

    def keep(self: Any, *args: Any, **kwargs: Any) -> Any:
        kept.update(agent=self, args=args, kwargs=kwargs)
        raise _Caught

    if seeds == 1:
        runner = Runner(cfg, root / "single")
        cls, start = type(runner.algo), runner.run
    else:  # the batch's algorithm: the class's own `stack` (`PPO.stack`, `DQN.stack`, ...)
        batch = SeedRunner(cfg, root / "batch")
        cls, start = type(batch.batch.algo.algo), batch.run  # (seed_batch/stacked_calls.py)
    real = cls.update
    cls.update = keep
    try:
        start()
    except _Caught:
        pass
    finally:
        cls.update = real
    if not kept:
        raise SystemExit(f"{algo}:{env} x{seeds}: the run ended before its first update")
    return kept["agent"], kept["args"], kept["kwargs"], cfg


def run_products(algo: str, env: str, budget: int, seeds: int, root: Path,
                 repeats: int) -> dict[str, float]:
    """Seconds of one update's products, and of the budget's updates' products, for `seeds`."""
    from rltrain.config.catalog import ALGORITHMS

    agent, args, kwargs, cfg = first_update(algo, env, budget, seeds, root)
    on_policy = ALGORITHMS[algo].family == "on_policy"
    products = update_floor.update_products(agent, args, kwargs)
    per_update = update_floor.time_products(products, repeats, 1 if on_policy else 50)
    learning = budget - (0 if on_policy else cfg.algo.learning_starts)
    updates = learning / update_floor.env_steps_per_update(cfg, on_policy)
    return {"products_per_update_s": per_update, "products": len(products), "updates": updates,
            "products_run_s": per_update * updates}


def measure(task: str, seeds: int, repeats: int) -> dict[str, Any]:
    """One row: the single run's and the batch's products over the budget, one seed's whole
    run, and the floor in multiples of it."""
    algo, env, budget = seed_batch.parse_task(task)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        single = run_products(algo, env, budget, 1, root / "one", repeats)
        batch = run_products(algo, env, budget, seeds, root / "many", repeats)
        one_seed_s, final = seed_batch.train_single(algo, env, budget, 0, root / "whole")
    return {"task": task, "seeds": seeds, "single": single, "batch": batch,
            "one_seed_s": one_seed_s, "one_seed_final": final,
            "floor_x_one_seed": batch["products_run_s"] / one_seed_s, "target": TARGET,
            "date": str(datetime.date.today())}


def write(rows: list[dict[str, Any]], out: Path) -> None:
    """seed_batch_floor.{json,md}."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "seed_batch_floor.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# The products floor of a seed batch (`benchmarks/seed_batch_floor.py`)",
        "",
        f"Measured {', '.join(sorted({r['date'] for r in rows}))}, one torch thread. `products`: "
        "the matrix products of one update replayed alone, times the updates of the budget; `one "
        "seed`: that seed's whole training run, timed as `seed_batch.py` times it. `floor`: the "
        "batch's products over one seed's whole run, the least multiple of one seed that the "
        "same stacked networks allow on this CPU at one thread.",
        "",
        "| task | seeds | updates | one seed's products s | the batch's products s | one seed's "
        "whole run s | floor x one seed | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['seeds']} | {r['batch']['updates']:,.0f} | "
            f"{r['single']['products_run_s']:.1f} | {r['batch']['products_run_s']:.1f} | "
            f"{r['one_seed_s']:.1f} | {r['floor_x_one_seed']:.2f} | {r['target']} |")
    (out / "seed_batch_floor.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), metavar="ALGO:ENV:BUDGET")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    path = args.out / "seed_batch_floor.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    for task in args.tasks:
        row = measure(task, args.seeds, args.repeats)
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if (r["task"], r["seeds"]) != (task, args.seeds)] + [row]
        write(rows, args.out)


if __name__ == "__main__":
    main()
