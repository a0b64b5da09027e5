"""Env engines side by side (issue 46): env steps/s of each engine per family and env count,
random actions through rltrain's VecEnv (what training sees), then end to end under PPO, back
to back in one process on this machine. `env.backend=auto` follows this table
(`rltrain/envs/engines/choice.py`; tests/envs/test_engines.py checks they agree).

    python benchmarks/env_engines.py                      # everything (~15 min on 2 cores)
    python benchmarks/env_engines.py --families CartPole --envs 1 8 --no-ppo --seconds 1
    python benchmarks/env_engines.py --load --envs 8 16 32 64 --ppo-envs 8 16 32 64 --merge
    python benchmarks/env_engines.py --families CartPole --envs --ppo-envs 8 16 32 64 --load \
        --rounds 3 --merge                                # PPO cells only, median of 3 rounds

`--load`: every cell is measured twice, back to back: on the machine as it is, and with
another process busy on one core (`busy_core`, a Python loop: a second job, a sweep's other
trial), which EnvPool's worker threads must share; they go to `random_load` and `ppo_load`.

Random actions: `make_env(env.backend=<engine>)` stepped with actions drawn before the clock
starts. Breakout adds the raw C++ engines without rltrain's adapter (ale-py's
`AtariVectorEnv`, EnvPool's Breakout-v5, both 84x84 gray, skip 4, stack 4) beside rltrain's
gymnasium path, which preprocesses each env in Python. PPO: `rltrain.train` with the family's
tuned preset where there is one, `env.num_envs=N`, a rollout of ~2048 steps, evaluation off;
env steps/s of the training loop (`final/wall_clock_s`: the final evaluation left out). Writes benchmarks/results/env_engines.json
and .md after every cell (an interrupted run keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

FAMILIES = {"CartPole": ("CartPole-v1", "classic"), "LunarLander": ("LunarLander-v3", "box2d"),
            "Hopper": ("Hopper-v5", "mujoco"), "HalfCheetah": ("HalfCheetah-v5", "mujoco"),
            "Breakout": ("ALE/Breakout-v5", "atari")}
CPP = {"atari": "ale"}
"""The C++ engine `auto` weighs against gymnasium, per kind (EnvPool for the others): ale-py's
vector env behind rltrain's adapter for Atari, which EnvPool's Atari cannot replace (rltrain
refuses it: its preprocessing is not rltrain's)."""


def cpp(kind: str) -> str:
    """The C++ engine of `kind` (see `CPP`)."""
    return CPP.get(kind, "envpool")


def engines_of(kind: str) -> tuple[str, ...]:
    """The engines measured through rltrain for `kind`: gymnasium and its C++ engine."""
    return ("gymnasium", cpp(kind))
PPO_STEPS = {"CartPole": 32768, "LunarLander": 32768, "Hopper": 16384, "HalfCheetah": 16384,
             "Breakout": 4096}
"""Env steps of each end-to-end PPO cell (~10-30 s on 2 cores)."""


@contextlib.contextmanager
def busy_core(on: bool = True) -> Iterator[None]:
    """Another process busy on one core for the block (nothing when `on` is False)."""
    if not on:
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.5)  # running before the clock starts
    try:
        yield
    finally:
        burner.kill()
        burner.wait()


def _rate(step, num_envs: int, seconds: float) -> float:
    """Env steps/s (summed over envs) of calling `step(i)`, after a short warm-up."""
    for i in range(3):
        step(i)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(count)
        count += 1
    return count * num_envs / elapsed


def random_rate(env_id: str, engine: str, n: int, seconds: float) -> float | None:
    """rltrain's VecEnv of `env_id` on `engine`, random actions; None where it cannot run."""
    import torch

    from rltrain.envs.config import EnvConfig
    from rltrain.envs.make import make_env
    from rltrain.errors import UserError

    try:
        env = make_env(EnvConfig(id=env_id, backend=engine, num_envs=n))
    except UserError:
        return None
    env.reset(seed=0)
    spec = env.spec
    g = torch.Generator().manual_seed(0)
    if spec.action_kind == "discrete":
        pool = torch.randint(0, spec.action_dim, (64, n), generator=g)
    else:
        pool = torch.rand(64, n, spec.action_dim, generator=g) * 2 - 1
    try:
        return _rate(lambda i: env.step(pool[i % 64]), n, seconds)
    finally:
        env.close()


def raw_atari_rate(engine: str, n: int, seconds: float) -> float | None:
    """Breakout on a C++ engine without rltrain's adapter (None when it is not installed)."""
    import numpy as np

    try:
        if engine == "ale-py AtariVectorEnv (raw)":
            from ale_py.vector_env import AtariVectorEnv

            env = AtariVectorEnv("breakout", num_envs=n, num_threads=min(n, os.cpu_count() or 1))
        else:
            import envpool

            env = envpool.make_gymnasium("Breakout-v5", num_envs=n, seed=0,
                                         num_threads=min(n, os.cpu_count() or 1))
    except ImportError:
        return None
    env.reset(seed=0) if engine.startswith("ale") else env.reset()
    pool = np.random.default_rng(0).integers(0, 4, (64, n))
    try:
        return _rate(lambda i: env.step(pool[i % 64]), n, seconds)
    finally:
        env.close()


def ppo_rate(family: str, engine: str, n: int) -> float | None:
    """Env steps/s of a PPO training loop; None where it cannot run."""
    import tempfile

    import rltrain
    from rltrain.errors import UserError

    env_id, _ = FAMILIES[family]
    steps = PPO_STEPS[family]
    rollout = max(16, 2048 // n)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = ["algo=ppo", f"env={env_id}", f"env.backend={engine}", f"env.num_envs={n}",
                     f"algo.n_steps={rollout}", f"total_timesteps={steps}", "eval.freq=0",
                     "eval.episodes=1", "checkpoint.freq=0", "progress=off"]
        try:
            rltrain.train(overrides, run_dir=Path(tmp) / "run")
        except UserError as exc:
            print(f"  {family} {engine} {n}: {exc}", flush=True)
            return None
        with open(Path(tmp) / "run" / "metrics.csv") as f:  # the loop's own clock: no final eval
            wall = next(float(row.split(",")[3]) for row in f
                        if row.split(",")[2] == "final/wall_clock_s")
        return steps / wall


MARGIN = 1.05
"""EnvPool counts as faster where its steps/s are at least this many times gymnasium's: the same
gymnasium cell measured twice, back to back, differed by up to 6% (PPO Hopper, 16 envs)."""
NEVER = 1 << 62


def derive_choice(results: dict[str, Any]) -> tuple[dict[str, int], dict[str, float]]:
    """What `env.backend=auto` should follow (`engines/choice.py`): per measured env id, the
    smallest env count from which EnvPool is faster than gymnasium (by `MARGIN`) at every
    measured count, in every table that decides; per kind (classic, box2d, mujoco), for its ids
    not measured, the latest of its measured ids' (`NEVER` if one never was); and the smallest
    ratio at each start (one decimal). The tables that decide: training end to end (`ppo`) and
    under load (`ppo_load`) where measured; the random-action table where no PPO was."""
    parts = [part for part in ("ppo", "ppo_load") if results.get(part)] or ["random"]
    faster_from: dict[str, int] = {}
    measured: dict[str, float] = {}
    for family, (env_id, kind) in FAMILIES.items():
        tables = [results[part].get(family, {}) for part in parts]
        if not any(cells.get(cpp(kind)) for cells in tables):
            continue
        starts = [_faster_from(cells, cpp(kind)) for cells in tables]
        start = NEVER if None in starts else max(starts)
        faster_from[env_id] = start
        faster_from[kind] = max(faster_from.get(kind, 0), start)
        if start < NEVER:
            measured[env_id] = _ratio_at(results, parts, family, start)
    for family, (env_id, kind) in FAMILIES.items():
        if env_id in measured and faster_from[kind] < NEVER:
            ratio = _ratio_at(results, parts, family, faster_from[kind])
            measured[kind] = min(measured.get(kind, ratio), ratio)
    return faster_from, {k: round(v, 1) for k, v in measured.items()}


def _ratio_at(results: dict[str, Any], parts: list[str], family: str, n: int) -> float:
    """The C++ engine's smallest steps/s ratio to gymnasium's for `family` at `n` envs in `parts`."""
    engine = cpp(FAMILIES[family][1])
    return min(results[part][family][engine][str(n)] / results[part][family]["gymnasium"][str(n)]
               for part in parts)


def _faster_from(cells: dict[str, Any], engine: str = "envpool") -> int | None:
    """The smallest env count from which `engine` beat gymnasium by `MARGIN` at every measured
    count of `cells` (engine -> count -> steps/s); None where it never did."""
    gym_rates, pool = cells.get("gymnasium", {}), cells.get(engine, {})
    counts = sorted(int(n) for n in gym_rates if gym_rates[n] and pool.get(n))
    wins = [n for n in counts if all(pool[str(m)] >= MARGIN * gym_rates[str(m)]
                                     for m in counts if m >= n)]
    return min(wins) if wins else None


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "env_engines.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["# Env engines: env steps/s per engine, family and env count", "",
             f"{results['machine']}; {results['date']}. `python benchmarks/env_engines.py`.",
             "Random actions through rltrain's VecEnv; \"(raw)\": the engine alone. PPO: the "
             "training loop end to end (rollout ~2048 steps, evaluation off). Ratio: EnvPool "
             "(or the best C++ engine) over gymnasium.", ""]
    notes = results.get("notes", [])
    lines += [*(f"- {note}" for note in notes), *([""] if notes else [])]
    for part, title in (("random", "Random actions"), ("random_load", "Random actions, "
                         "another process busy on one core"), ("ppo", "End to end under PPO"),
                        ("ppo_load", "End to end under PPO, another process busy on one core")):
        rows = results.get(part, {})
        counts = sorted({int(n) for cells in rows.values() for e in cells.values() for n in e})
        if not counts:
            continue
        lines += [f"## {title}", "", "| family | engine | " + " | ".join(
            f"{n} env{'s' if n > 1 else ''}" for n in counts) + " |",
                  "|---|---|" + "---:|" * len(counts)]
        for family, cells in rows.items():
            base = cells.get("gymnasium", {})
            for engine, by_n in cells.items():
                shown = []
                for n in counts:
                    rate = by_n.get(str(n))
                    if rate is None:
                        shown.append("–")
                        continue
                    ratio = (f" ({rate / base[str(n)]:.2f}x)" if engine != "gymnasium"
                             and base.get(str(n)) else "")
                    shown.append(f"{rate / 1000:.1f}k{ratio}" if rate >= 1000
                                 else f"{rate:.0f}{ratio}")
                lines.append(f"| {family} | {engine} | " + " | ".join(shown) + " |")
        lines.append("")
    faster_from, measured = derive_choice(results)
    if faster_from:
        lines += ["## What `env.backend=auto` follows", "",
                  f"The C++ engine (EnvPool; ale-py's for Atari) from this many envs on: at "
                  f"least {MARGIN:.2f}x gymnasium's steps/s "
                  "at every measured count from there, end to end under PPO, on the machine as "
                  "it was and with another process busy on one core. An id not measured follows "
                  "its kind's line, the latest of the kind's measured ids "
                  "(`rltrain/envs/engines/choice.py`); EnvPool only for ids whose EnvPool env "
                  "is checked equal to gymnasium's (`rltrain/envs/engines/twins.py`: no Box2D "
                  "id); ale-py's engine plays the gymnasium path's frames "
                  "(`tests/envs/test_ale_engine.py`):", ""]
        lines += [f"- {key}: {'never' if n >= NEVER else f'{n} envs ({measured[key]}x)'}"
                  for key, n in faster_from.items()]
        lines.append("")
    (out / "env_engines.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--envs", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--ppo-envs", nargs="*", type=int, default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=2.0, help="per random-action cell")
    parser.add_argument("--no-ppo", action="store_true")
    parser.add_argument("--rounds", type=int, default=1,
                        help="PPO cells: the median of this many interleaved rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--load", action="store_true",
                        help="measure every cell also with another process busy on one core")
    parser.add_argument("--merge", action="store_true",
                        help="keep the cells of the existing results file that this run does not "
                             "measure (e.g. re-measure random actions, keep the PPO cells)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    results: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {sys.version.split()[0]}, torch {torch.__version__}, "
                   f"{args.threads} torch thread(s)",
        "date": time.strftime("%Y-%m-%d"), "random": {}, "ppo": {}, "random_load": {},
        "ppo_load": {}}
    saved = out / "env_engines.json"
    if args.merge and saved.is_file():
        old = json.loads(saved.read_text())
        for part in ("random", "ppo", "random_load", "ppo_load"):
            results[part] = old.get(part, {})
    settings = [("", False)] + ([("_load", True)] if args.load else [])
    for family in args.families:
        env_id, kind = FAMILIES[family]
        for suffix, _ in settings:  # this run's cells of it replace the saved ones
            if args.envs:  # (`--envs` with no count: the random-action cells are kept)
                results["random" + suffix][family] = {}
        engines = list(engines_of(kind)) + (["ale-py AtariVectorEnv (raw)",
                                             "envpool Breakout-v5 (raw)"] if kind == "atari" else [])
        for n in args.envs:
            for engine in engines:
                for suffix, loaded in settings:  # back to back: the same machine state
                    with busy_core(loaded):
                        rate = (raw_atari_rate(engine, n, args.seconds) if "(raw)" in engine
                                else random_rate(env_id, engine, n, args.seconds))
                    results["random" + suffix][family].setdefault(engine, {})[str(n)] = rate
                    print(f"random{suffix:5s} {family:12s} {engine:30s} {n:3d} envs: "
                          f"{'-' if rate is None else f'{rate:,.0f}'} steps/s", flush=True)
                    write(results, out)
    if not args.no_ppo:
        measure_ppo(results, args.families, args.ppo_envs, settings, args.rounds, out)


def measure_ppo(results: dict[str, Any], families: list[str], counts: list[int],
                settings: list[tuple[str, bool]], rounds: int, out: Path) -> None:
    """The PPO cells of `families`: each cell the median of `rounds` measurements, the rounds
    interleaved (every cell of round 1, then of round 2, ...) so that a slow spell of the
    machine lands on every cell alike; written after each measurement."""
    seen: dict[tuple[str, str, str, str], list[float]] = {}
    for family in families:
        for suffix, _ in settings:
            results["ppo" + suffix][family] = {}
    for r in range(rounds):
        for family in families:
            for n in counts:
                for engine in engines_of(FAMILIES[family][1]):
                    for suffix, loaded in settings:
                        with busy_core(loaded):
                            rate = ppo_rate(family, engine, n)
                        key = ("ppo" + suffix, family, engine, str(n))
                        if rate is not None:
                            seen.setdefault(key, []).append(rate)
                        cell = median_of(seen.get(key, []))
                        results[key[0]][family].setdefault(engine, {})[key[3]] = cell
                        print(f"ppo{suffix:8s} {family:12s} {engine:30s} {n:3d} envs: "
                              f"{'-' if rate is None else f'{rate:,.0f}'} steps/s (round "
                              f"{r + 1} of {rounds})", flush=True)
                        write(results, out)


def median_of(values: list[float]) -> float | None:
    """The median of `values` (None for none)."""
    return statistics.median(values) if values else None


if __name__ == "__main__":
    main()
