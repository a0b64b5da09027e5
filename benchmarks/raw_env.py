"""Plain gymnasium stepping speed: the ceiling any trainer's env steps/s sits under.

Random actions, no policy, no buffer. Sync and async vector envs are built like rltrain's
`envs/make.py` builds them (`gym.make` per copy, SAME_STEP autoreset); "vector_entry_point" is
the env's own numpy-vectorized class (`gym.make_vec(..., vectorization_mode="vector_entry_point")`,
CartPole only among the classic-control envs), whose only autoreset mode is NEXT_STEP.

Actions come from a pool of 256 batched `action_space.sample()` draws made before the clock
starts and cycled through (`actions="pool"`), so only env stepping is timed; `actions="sample"`
draws a fresh batch every step instead.

    python benchmarks/raw_env.py [--seconds 2] [--envs 1 4 16 64]
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # as rltrain/envs/make.py

VECTORIZATIONS = ("sync", "async", "vector_entry_point")
AUTORESETS = ("same_step", "next_step")
POOL = 256  # batched actions drawn before timing


def make_vector_env(env_id: str, num_envs: int, vectorization: str = "sync",
                    autoreset: str | None = None) -> Any:
    """A gymnasium vector env; `autoreset` defaults to SAME_STEP (NEXT_STEP for vector_entry_point)."""
    import gymnasium as gym
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

    from rltrain.errors import UserError

    if vectorization not in VECTORIZATIONS:
        raise UserError(f"unknown vectorization {vectorization!r}; choose one of {', '.join(VECTORIZATIONS)}")
    if vectorization == "vector_entry_point":
        if autoreset not in (None, "next_step"):
            raise UserError("vector_entry_point envs only autoreset NEXT_STEP; pass autoreset='next_step'")
        if gym.spec(env_id).vector_entry_point is None:
            raise UserError(f"{env_id} has no vector_entry_point; use vectorization='sync' or 'async'")
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    autoreset = autoreset or "same_step"
    if autoreset not in AUTORESETS:
        raise UserError(f"unknown autoreset {autoreset!r}; choose one of {', '.join(AUTORESETS)}")
    mode = AutoresetMode.SAME_STEP if autoreset == "same_step" else AutoresetMode.NEXT_STEP
    cls = AsyncVectorEnv if vectorization == "async" else SyncVectorEnv
    return cls([partial(gym.make, env_id) for _ in range(num_envs)], autoreset_mode=mode)


def raw_steps_per_second(env_id: str, num_envs: int, vectorization: str = "sync",
                         seconds: float = 2.0, autoreset: str | None = None,
                         actions: str = "pool") -> float:
    """Env steps/s (summed over envs) of random-action stepping, after a 0.2 s warm-up."""
    envs = make_vector_env(env_id, num_envs, vectorization, autoreset)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        pool = [envs.action_space.sample() for _ in range(POOL)]

        def run(duration: float) -> tuple[int, float]:
            calls, t0 = 0, time.perf_counter()
            while True:
                for i in range(64):
                    act = pool[i % POOL] if actions == "pool" else envs.action_space.sample()
                    envs.step(act)
                calls += 64
                elapsed = time.perf_counter() - t0
                if elapsed >= duration:
                    return calls, elapsed

        run(0.2)  # warm-up: first episodes, caches, async workers
        calls, elapsed = run(seconds)
    finally:
        envs.close()
    return calls * num_envs / elapsed


def main(argv: list[str] | None = None) -> None:
    """Print steps/s for Pendulum-v1 and CartPole-v1 at several env counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per cell")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--actions", choices=("pool", "sample"), default="pool")
    args = parser.parse_args(argv)
    columns = [("sync", "same_step"), ("async", "same_step"), ("sync", "next_step"),
               ("vector_entry_point", "next_step")]
    print(f"env steps/s, random actions ({args.actions}), {args.seconds:g} s per cell, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    header = "| env | n | " + " | ".join(f"{v} ({a})" for v, a in columns) + " |"
    print(header)
    print("|" + "---|" * (len(columns) + 2))
    for env_id in ("Pendulum-v1", "CartPole-v1"):
        for n in args.envs:
            cells = []
            for vec, reset in columns:
                if vec == "vector_entry_point" and env_id != "CartPole-v1":
                    cells.append("-")
                    continue
                rate = raw_steps_per_second(env_id, n, vec, args.seconds, reset, args.actions)
                cells.append(f"{rate:,.0f}")
            print(f"| {env_id} | {n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
