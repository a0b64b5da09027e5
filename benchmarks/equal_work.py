"""rltrain, Stable-Baselines3 and SBX (Stable-Baselines-Jax) given the same hyperparameters, so
that each does the same work: training seconds side by side, interleaved round by round.

    make bench-sbx                     # its own venv (.venv-sbx: jax, sbx-rl, SB3, rltrain)
    .venv-sbx/bin/python benchmarks/equal_work.py [--rows sac:Hopper-v5 ...] [--rounds 2]
        [--out benchmarks/results]

Each run is a fresh process with one torch thread (JAX keeps its own), training only: no
evaluation (rltrain's final one is off the clock), envs stepped by gymnasium on every side
(`env.backend=gymnasium`, one env). rltrain runs twice, its update eager (`compile=false`) and
compiled (`compile=true`, the compile included in its seconds and shown apart, from an empty
cache folder: the cost a first run on a new machine pays, then again on the cache that filled:
what every later run of the same shapes pays); SBX's seconds include its JIT.
Results: `benchmarks/results/equal_work.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import report  # noqa: E402

# row -> (env steps, SB3/SBX constructor kwargs, the same for rltrain as overrides)
ROWS: dict[str, tuple[int, dict[str, Any], list[str]]] = {
    "sac:Hopper-v5": (30_000, {
        "learning_rate": 1e-3, "batch_size": 256, "buffer_size": 1_000_000,
        "learning_starts": 5_000, "gradient_steps": 2, "train_freq": 1,
        "policy_kwargs": {"net_arch": [128, 128]}}, [
        "algo.lr=1e-3", "algo.batch_size=256", "algo.buffer_size=1000000",
        "algo.learning_starts=5000", "algo.gradient_steps=2", "algo.train_freq=1",
        "algo.hidden_sizes=[128,128]"]),
    "sac:Pendulum-v1": (20_000, {
        "learning_rate": 1e-3, "batch_size": 256, "buffer_size": 200_000,
        "learning_starts": 1_000, "policy_kwargs": {"net_arch": [64, 64]}}, [
        "algo.lr=1e-3", "algo.batch_size=256", "algo.buffer_size=200000",
        "algo.learning_starts=1000", "algo.hidden_sizes=[64,64]"]),
    "td3:Pendulum-v1": (20_000, {
        "learning_rate": 1e-3, "batch_size": 256, "buffer_size": 200_000, "gamma": 0.98,
        "learning_starts": 1_000, "policy_kwargs": {"net_arch": [64, 64]},
        "noise_std": 0.1}, [
        "algo.lr=1e-3", "algo.batch_size=256", "algo.buffer_size=200000", "algo.gamma=0.98",
        "algo.learning_starts=1000", "algo.hidden_sizes=[64,64]", "algo.action_noise=0.1"]),
    "dqn:CartPole-v1": (50_000, {  # RL-Zoo's DQN CartPole entry
        "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
        "learning_starts": 1_000, "gamma": 0.99, "target_update_interval": 10,
        "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}}, [
        "algo.lr=2.3e-3", "algo.batch_size=64", "algo.buffer_size=100000",
        "algo.learning_starts=1000", "algo.gamma=0.99", "algo.target_update_interval=10",
        "algo.train_freq=256", "algo.gradient_steps=128", "algo.exploration_steps=8000",
        "algo.exploration_final_eps=0.04", "algo.hidden_sizes=[256,256]",
        "algo.double_q=false"]),  # SB3's and SBX's DQN: no double-Q
}
SIDES = ("rltrain_eager", "rltrain_compiled", "sb3", "sbx")
WARM = "rltrain_warm"
"""rltrain compiled again on the cache its cold run just filled: a later run on this machine."""


def run_rltrain(row: str, seed: int, compiled: bool, cache: str) -> dict[str, float]:
    """rltrain's `Runner` on the row's overrides (no preset), training seconds and compile."""
    from rltrain_side import timed_run

    from rltrain.config.compose import compose_train_config

    algo, env = row.split(":")
    steps, _, overrides = ROWS[row]
    cfg = compose_train_config([
        f"algo={algo}", f"env={env}", f"seed={seed}", f"total_timesteps={steps}", "~tuned",
        "env.num_envs=1", "env.backend=gymnasium", "logger=none", "progress=off",
        "checkpoint.freq=0", "eval.freq=1e9", "eval.episodes=1", "eval.background=false",
        f"compile={str(compiled).lower()}", f"compile_cache={cache}", *overrides])
    out = timed_run(cfg)
    graph = getattr(out["runner"].algo, "graph", None)
    return {"seconds": out["train_seconds"],
            "compile_s": getattr(graph, "compile_seconds", 0.0) if compiled else 0.0,
            "compiled": float(graph is not None)}


def run_baseline(row: str, seed: int, side: str) -> dict[str, float]:
    """SB3's or SBX's `learn` on the row's kwargs (one DummyVecEnv env), its seconds."""
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(1)
    algo, env_id = row.split(":")
    steps, kwargs, _ = ROWS[row]
    kwargs = dict(kwargs)
    if side == "sbx":
        import sbx as lib
    else:
        import stable_baselines3 as lib
    env = gym.make(env_id)
    if "noise_std" in kwargs:
        from stable_baselines3.common.noise import NormalActionNoise

        n = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(n), kwargs.pop("noise_std") * np.ones(n))
    model = getattr(lib, algo.upper())("MlpPolicy", env, seed=seed, verbose=0, **kwargs)
    started = time.perf_counter()
    model.learn(steps)
    return {"seconds": time.perf_counter() - started, "compile_s": float("nan"), "compiled": 0.0}


def spawn(row: str, seed: int, side: str, cache: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--one", row, str(seed), side, cache],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side} {row} seed {seed} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(rows: list[str], rounds: int, sides: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for r in range(rounds):
        for row in rows:
            order = sides[r % len(sides):] + sides[:r % len(sides)]  # who goes first rotates
            if "rltrain_compiled" in order:  # the warm run right after the cold one
                order.insert(order.index("rltrain_compiled") + 1, WARM)
            with tempfile.TemporaryDirectory() as cache:
                for side in order:
                    got = spawn(row, r, side, cache)
                    results.setdefault(row, {}).setdefault(side, []).append(got)
                    print(f"round {r + 1} {row} {side}: {got['seconds']:.1f} s"
                          + (f" (compile {got['compile_s']:.1f} s)" if got["compile_s"] > 0
                             else ""), flush=True)
    return results


def markdown(results: dict[str, Any]) -> str:
    lines = ["# rltrain, SB3 and SBX on the same hyperparameters",
             "",
             "`make bench-sbx` (`benchmarks/equal_work.py`): training seconds, median over rounds "
             "[per round]; one torch thread, one gymnasium env, no evaluation; rltrain compiled: "
             "compile from an empty cache included (and shown apart); SBX: its JIT included. "
             "One DQN gradient step of each, taken apart: `dqn_step.md`.",
             "",
             "| row | rltrain eager | rltrain compiled, first run (compile) | rltrain compiled, "
             "later runs (compile) | SB3 | SBX | compiled / SBX: first, later |",
             "|---|---|---|---|---|---|---|"]
    for row, by_side in results.items():
        def cell(side: str, by_side: dict[str, Any] = by_side) -> str:
            runs = by_side.get(side, [])
            if not runs:
                return "missing"
            seconds = [x["seconds"] for x in runs]
            text = f"{statistics.median(seconds):.1f} [{', '.join(f'{s:.1f}' for s in seconds)}]"
            if side in ("rltrain_compiled", WARM):
                text += f" ({statistics.median(x['compile_s'] for x in runs):.1f})"
            return text

        def median(side: str, by_side: dict[str, Any] = by_side) -> float | None:
            runs = by_side.get(side, [])
            return statistics.median(x["seconds"] for x in runs) if runs else None
        sbx = median("sbx")
        ratios = ", ".join("missing" if sbx is None or median(side) is None
                           else f"{median(side) / sbx:.2f}" for side in ("rltrain_compiled", WARM))
        lines.append(f"| {row} {ROWS[row][0]:,} | {cell('rltrain_eager')} | "
                     f"{cell('rltrain_compiled')} | {cell(WARM)} | {cell('sb3')} | {cell('sbx')} "
                     f"| {ratios} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        row, seed, side, cache = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        if side.startswith("rltrain"):
            out = run_rltrain(row, seed, side in ("rltrain_compiled", WARM), cache)
        else:
            out = run_baseline(row, seed, side)
        print(json.dumps(out))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--sides", nargs="*", default=list(SIDES), choices=list(SIDES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = measure(args.rows, args.rounds, args.sides)
    report("equal_work", results, markdown(results), args.out)


if __name__ == "__main__":
    main()
