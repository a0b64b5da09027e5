"""Run by `scaling.py` under torchrun (2 ranks): the mean time of one flat gradient all-reduce
of the PPO networks `env` gets (its tuned preset), as `ProcessGroup.average_` does it.

    torchrun --standalone --nproc_per_node=2 benchmarks/scaling_allreduce.py ENV OUT_JSON
"""

from __future__ import annotations

import json
import sys
import time

import torch

from rltrain.config.compose import compose_train_config
from rltrain.config.registry import get_algo_spec
from rltrain.envs.make import make_env
from rltrain.parallel.process_group import join
from rltrain.parallel.world import world_from_env


def main() -> None:
    env_id, out = sys.argv[1:3]
    world = world_from_env()
    assert world is not None and world.size == 2
    cfg = compose_train_config(["algo=ppo", f"env={env_id}", "logger=none"])
    env = make_env(cfg.env, "cpu", num_envs=1)
    algo = get_algo_spec("ppo").build(cfg.algo, env.spec, "cpu")
    env.close()
    grads = [torch.randn_like(p) for p in algo.policy.parameters()]
    group = join(world, torch.device("cpu"))
    for _ in range(20):  # warm-up
        group.average_(grads)
    calls = 500
    start = time.perf_counter()
    for _ in range(calls):
        group.average_(grads)
    seconds = time.perf_counter() - start
    if world.is_main:
        with open(out, "w") as f:
            json.dump({"calls": calls, "us_per_call": 1e6 * seconds / calls,
                       "numel": sum(g.numel() for g in grads)}, f)
    group.close()


if __name__ == "__main__":
    main()
