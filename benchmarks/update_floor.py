"""How far each tuned task's update is above its matrix-product floor, and what that floor
means for the time ratio against SB3.

    python benchmarks/update_floor.py                          # DEFAULT_TASKS: quality.py's MLP rows, PPO Breakout
    python benchmarks/update_floor.py --tasks sac:HalfCheetah-v5 dqn:MountainCar-v0

For each task, a run of its preset (the quality benchmark's command line) goes until the first
update and keeps that update's inputs. The update is then timed alone (median of `--repeats`
blocks), and under `torch.profiler` (shapes recorded) its matrix products (`aten::mm`, `addmm`,
`bmm`, `baddbmm`) and convolutions (`conv2d`, `convolution_backward`), the outermost ones, are
replayed alone on random tensors of the same shapes:
`products / update` is the share of the update that is arithmetic any implementation of the same
networks must do. Spread over the env steps each update stands for (off-policy: `train_freq` x
envs / `gradient_steps`; on-policy: the rollout), and set against SB3's measured seconds per env
step (benchmarks/results/quality.json), it gives the lowest rltrain / SB3 time ratio that any
float32 implementation with the same networks and update count reaches on this CPU.

Run it as the quality runs were timed, one torch thread while another benchmark holds the other
core: the products' seconds and SB3's are then taken under the same load. The replay uses
contiguous inputs where the update's backward products may take transposed views (MKL takes
either at about the same speed here). Convolutions count as products too (`aten::conv2d` and
`aten::convolution_backward`, replayed with the stride, padding and output mask the profiler
recorded, on channels-last inputs as the Nature CNN lays them out on a CPU), so image tasks
(PPO Breakout) get a floor as well: their networks' arithmetic.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import quality  # noqa: E402 - the task table and command lines of the quality benchmark

RESULTS = Path(__file__).parent / "results"


def _tensors_only(call: Any) -> Any:
    return lambda tensors, scalars: call(*tensors)


def _conv2d(tensors: list[Any], scalars: list[Any]) -> Any:
    stride, padding, dilation, groups = scalars[:4]
    return torch.conv2d(*tensors, stride, padding, dilation, groups)


def _conv_backward(tensors: list[Any], scalars: list[Any]) -> Any:
    bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask = scalars[:8]
    return torch.ops.aten.convolution_backward(*tensors, bias_sizes, stride, padding, dilation,
                                               transposed, output_padding, groups, mask)


PRODUCTS = {"aten::mm": (_tensors_only(torch.mm), 2), "aten::addmm": (_tensors_only(torch.addmm), 3),
            "aten::bmm": (_tensors_only(torch.bmm), 2),
            "aten::baddbmm": (_tensors_only(torch.baddbmm), 3),
            "aten::conv2d": (_conv2d, 3), "aten::convolution_backward": (_conv_backward, 3)}
"""The product ops counted: (the call that replays one from its tensors and its recorded
scalar arguments, how many tensor inputs lead its arguments)."""
DEFAULT_TASKS = ("sac:HalfCheetah-v5", "sac:Hopper-v5", "sac:LunarLanderContinuous-v3",
                 "sac:MountainCarContinuous-v0", "ppo:HalfCheetah-v5", "ppo:LunarLander-v3",
                 "dqn:LunarLander-v3", "dqn:MountainCar-v0", "ppo:MountainCarContinuous-v0",
                 "ppo:ALE/Breakout-v5")


class FirstUpdate(Exception):
    """Raised out of the training run once the first update's inputs are kept."""


def first_update(algo: str, env: str) -> tuple[Any, tuple, dict, Any, bool]:
    """(the algorithm, the first update's args and kwargs, the run's config, whether it is
    on-policy) from a run of the task's preset stopped at its first update; off-policy runs
    start learning after at most 1,000 steps."""
    from rltrain.config.compose import compose_train_config
    from rltrain.runner.runner import Runner

    overrides = quality.rltrain_overrides(algo, env, seed=0)
    cfg = compose_train_config(overrides)
    if hasattr(cfg.algo, "learning_starts"):
        cfg = compose_train_config([*overrides, f"algo.learning_starts={min(cfg.algo.learning_starts, 1000)}"])
    kept: dict[str, Any] = {}

    def keep(*args: Any, **kwargs: Any) -> Any:
        kept.update(args=args, kwargs=kwargs)
        raise FirstUpdate

    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(cfg, Path(tmp) / "run")
        agent = runner.algo
        agent.update = keep  # this instance only: the loop calls `algo.update(...)`
        try:
            runner.run()
        except FirstUpdate:
            pass
        finally:
            del agent.update
    if not kept:
        raise SystemExit(f"{algo}:{env}: the run ended before its first update")
    return agent, kept["args"], kept["kwargs"], cfg, runner.family == "on_policy"


def median_seconds(fn: Any, repeats: int, block: int) -> float:
    """Median seconds of one `fn()`, over `repeats` blocks of `block` calls after one warm-up block."""
    for _ in range(block):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(block):
            fn()
        times.append((time.perf_counter() - t) / block)
    return statistics.median(times)


Product = tuple[str, list[list[int]], list[Any]]
"""One product an update issued: (op name, its tensor inputs' shapes, its other arguments)."""


def update_products(agent: Any, args: tuple, kwargs: dict) -> list[Product]:
    """The outermost products one update issues: (op name, tensor input shapes, the recorded
    scalar arguments) each."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        agent.update(*args, **kwargs)
    found = []
    for event in prof.events():
        parent, nested = event.cpu_parent, False
        while parent is not None:
            nested = nested or parent.name in PRODUCTS
            parent = parent.cpu_parent
        if event.name in PRODUCTS and not nested:
            n = PRODUCTS[event.name][1]
            found.append((event.name, [list(s) for s in event.input_shapes[:n]],
                          list(event.concrete_inputs[n:])))
    return found


def random_input(shape: list[int]) -> torch.Tensor | None:
    """A random float32 tensor of `shape`, channels-last when 4-D (the layout the Nature CNN
    gives its convolutions on a CPU); None for an absent optional one (a conv without bias)."""
    if not shape:
        return None
    x = torch.randn(*shape)
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def time_products(products: list[Product], repeats: int, block: int) -> float:
    """Median seconds of the products alone, all of them once, on random inputs."""
    calls = [(PRODUCTS[name][0], [random_input(shape) for shape in shapes], scalars)
             for name, shapes, scalars in products]

    def once() -> None:
        for fn, tensors, scalars in calls:
            fn(tensors, scalars)

    return median_seconds(once, repeats, block)


def env_steps_per_update(cfg: Any, on_policy: bool) -> float:
    """The env steps one update call stands for in a full run of `cfg`."""
    envs = cfg.env.num_envs
    if on_policy:
        return float(cfg.algo.n_steps * envs)
    return cfg.algo.train_freq * envs / cfg.algo.gradient_steps


def seconds_per_step(runs: dict[str, Any], task: str, budget: int) -> tuple[float | None, ...]:
    """(SB3's, rltrain's) median training seconds per env step of `task` in quality.json's
    `runs`; None for a side with no run."""
    sides = runs.get(task, {})
    out = []
    for side in ("sb3", "rltrain"):
        seconds = [r["seconds"] for r in sides.get(side, {}).values() if r.get("seconds")]
        out.append(statistics.median(seconds) / budget if seconds else None)
    return tuple(out)


def floor_row(task: str, update_s: float, products_s: float, n_products: int, per_update: float,
              sb3: float | None, ours: float | None) -> dict[str, Any]:
    """One table row: the update and its products (seconds), the env steps an update stands
    for, and SB3's and rltrain's measured seconds per env step (None: not measured)."""
    row = {"task": task, "update_ms": update_s * 1e3, "products_ms": products_s * 1e3,
           "products": n_products, "share": products_s / update_s,
           "env_steps_per_update": per_update,
           "products_ms_per_env_step": products_s * 1e3 / per_update,
           "sb3_ms_per_env_step": None if sb3 is None else sb3 * 1e3,
           "rltrain_ms_per_env_step": None if ours is None else ours * 1e3}
    row["floor_ratio"] = None if sb3 is None else products_s / per_update / sb3
    row["ratio_now"] = None if sb3 is None or ours is None else ours / sb3
    return row


def measure(task: str, repeats: int, runs: dict[str, Any]) -> dict[str, Any]:
    """`floor_row` of `task`, measured now; `runs`: quality.json's."""
    algo, env = quality.parse_task(task)
    agent, args, kwargs, cfg, on_policy = first_update(algo, env)
    block = 1 if on_policy else 50
    update_s = median_seconds(lambda: agent.update(*args, **kwargs), repeats, block)
    products = update_products(agent, args, kwargs)
    products_s = time_products(products, repeats, block)
    sb3, ours = seconds_per_step(runs, task, quality.TASKS[(algo, env)].budget)
    return floor_row(task, update_s, products_s, len(products), env_steps_per_update(cfg, on_policy),
                     sb3, ours)


def rescore(row: dict[str, Any], runs: dict[str, Any]) -> dict[str, Any]:
    """A measured row with SB3's and rltrain's seconds per env step taken from `runs` again."""
    algo, env = quality.parse_task(row["task"])
    sb3, ours = seconds_per_step(runs, row["task"], quality.TASKS[(algo, env)].budget)
    fresh = floor_row(row["task"], row["update_ms"] / 1e3, row["products_ms"] / 1e3,
                      row["products"], row["env_steps_per_update"], sb3, ours)
    return {**row, **fresh}


def fmt(value: float | None, spec: str) -> str:
    return "missing" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report", action="store_true",
                        help="measure nothing: take the SB3 and rltrain seconds of the rows in "
                             "<out>/update_floor.json from quality.json again and rewrite the table")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    path = RESULTS / "quality.json"
    runs = json.loads(path.read_text())["runs"] if path.exists() else {}
    if args.report:
        write([rescore(row, runs) for row in json.loads((args.out / "update_floor.json").read_text())],
              args.out)
        return
    kept = args.out / "update_floor.json"
    rows = json.loads(kept.read_text()) if kept.exists() else []  # other tasks' rows stay
    for task in args.tasks:
        row = {**measure(task, args.repeats, runs), "date": str(datetime.date.today())}
        tasks = [r["task"] for r in rows]
        if task in tasks:
            rows[tasks.index(task)] = row
        else:
            rows.append(row)
        print(json.dumps(row), flush=True)
        write(rows, args.out)


def write(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "update_floor.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# Update time against its matrix-product floor (`benchmarks/update_floor.py`)",
        "",
        f"Measured {', '.join(sorted({str(r.get('date')) for r in rows}))}, one torch thread, another benchmark on the other core "
        "(the quality runs' condition). `update`: one update call of the task's preset; `products`: its matrix "
        "products (and convolutions) alone; `floor ratio`: the products' time per env step over SB3's measured "
        "training seconds per env step (quality.json), the lowest rltrain/SB3 time ratio with "
        "the same networks and update count in float32 on this CPU; `ratio now`: quality.json's.",
        "",
        "| task | update ms | products ms (count) | products share | env steps per update "
        "| products ms per env step | SB3 ms per env step | floor ratio | ratio now |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['update_ms']:.2f} | {r['products_ms']:.2f} ({r['products']}) "
            f"| {r['share']:.0%} | {r['env_steps_per_update']:g} | {r['products_ms_per_env_step']:.3f} "
            f"| {fmt(r['sb3_ms_per_env_step'], '.3f')} | {fmt(r['floor_ratio'], '.2f')} "
            f"| {fmt(r['ratio_now'], '.2f')} |")
    (out / "update_floor.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
