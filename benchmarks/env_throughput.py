"""Env steps/s of the native torch CartPole / Pendulum (`env.backend=torch`) against gymnasium.

Random actions from a pool drawn before the clock starts, no policy, no buffer, CPU. Columns:

- `native`: `rltrain.envs.native` (what `env.backend=torch` trains on), episode info on;
- `native, no info`: the same with `episode_info = False`, i.e. without the one host sync
  (`done.any()`) per step, to show what that sync costs;
- `sync`: gymnasium `SyncVectorEnv` of `gym.make` copies, SAME_STEP autoreset (what
  `env.backend=gymnasium` wraps), numpy actions, no torch conversion;
- `vector_entry_point`: CartPole's own numpy-vectorized class
  (`gym.make_vec("CartPole-v1", num_envs=N, vectorization_mode="vector_entry_point")`).

    python benchmarks/env_throughput.py [--seconds 1] [--envs 1 8 64 1024 4096] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

POOL = 64  # batched actions drawn before timing, cycled through
COLUMNS = ("native", "native, no info", "sync", "vector_entry_point")


def _rate(step: Callable[[int], object], num_envs: int, seconds: float) -> float:
    """Env steps/s (summed over envs) of calling `step(i)`, after a short warm-up."""
    for i in range(5):
        step(i)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(10):
            step(count)
            count += 1
    return count * num_envs / elapsed


def native_rate(env_id: str, num_envs: int, seconds: float, episode_info: bool = True) -> float:
    """Steps/s of the native torch env on the CPU."""
    import torch

    from rltrain.envs.native import make_native

    env = make_native(env_id, num_envs)
    env.episode_info = episode_info
    env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    if env.spec.action_kind == "discrete":
        pool = torch.randint(0, 2, (POOL, num_envs), generator=g)
    else:
        pool = torch.rand(POOL, num_envs, 1, generator=g) * 2 - 1
    return _rate(lambda i: env.step(pool[i % POOL]), num_envs, seconds)


def gym_rate(env_id: str, num_envs: int, seconds: float, mode: str) -> float | None:
    """Steps/s of a gymnasium vector env (`sync` or `vector_entry_point`); None if it has none."""
    from functools import partial

    import gymnasium as gym
    import numpy as np
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    if mode == "vector_entry_point":
        if gym.spec(env_id).vector_entry_point is None:
            return None
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    else:
        env = SyncVectorEnv([partial(gym.make, env_id) for _ in range(num_envs)],
                            autoreset_mode=AutoresetMode.SAME_STEP)
    env.reset(seed=0)
    space = env.action_space
    space.seed(0)
    pool = np.stack([space.sample() for _ in range(POOL)])
    try:
        return _rate(lambda i: env.step(pool[i % POOL]), num_envs, seconds)
    finally:
        env.close()


def main() -> None:
    """Print one markdown table per env with steps/s and the native/gymnasium ratios."""
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per cell")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8, 64, 1024, 4096])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU, torch {torch.__version__}, {args.threads} torch thread(s), "
          f"{args.seconds:g} s per cell; env steps/s summed over the N envs\n")
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        print(f"### {env_id}\n")
        print("| N | " + " | ".join(COLUMNS) + " | native / sync | native / vector_entry_point |")
        print("|---:|" + "---:|" * (len(COLUMNS) + 2))
        for n in args.envs:
            rates = {"native": native_rate(env_id, n, args.seconds),
                     "native, no info": native_rate(env_id, n, args.seconds, episode_info=False),
                     "sync": gym_rate(env_id, n, args.seconds, "sync"),
                     "vector_entry_point": gym_rate(env_id, n, args.seconds, "vector_entry_point")}
            cells = [f"{rates[c]:,.0f}" if rates[c] else "-" for c in COLUMNS]
            ratios = [f"{rates['native'] / rates[c]:.1f}x" if rates[c] else "-"
                      for c in ("sync", "vector_entry_point")]
            print(f"| {n} | " + " | ".join(cells + ratios) + " |", flush=True)
        print()


if __name__ == "__main__":
    main()
