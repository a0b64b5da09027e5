"""Run by `torchrun` in tests/e2e/test_torchrun.py: one PPO run per rank through the Python API,
with a probe attached after each update.

    torchrun --nproc_per_node=2 tests/e2e/torchrun_probe.py MODE RUN_DIR OUT_JSON

MODE `sync`: after every update, gather every rank's parameters and record whether they are
bitwise equal (`a2c`: the same with A2C). `nan`: rank 1 alone reports a NaN loss at its third update. `stop`: rank 1
alone asks to stop after its third update. Rank 0 writes what it saw to OUT_JSON.
"""

from __future__ import annotations

import json
import math
import sys

import torch
import torch.distributed as dist

from rltrain.config.compose import compose_train_config
from rltrain.errors import TrainingError
from rltrain.parallel.process_group import join
from rltrain.parallel.world import world_from_env
from rltrain.runner.runner import Runner


def main() -> None:
    mode, run_dir, out = sys.argv[1:4]
    world = world_from_env()
    assert world is not None
    algo = ["algo=a2c", "algo.n_steps=32"] if mode == "a2c" else [
        "algo=ppo", "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=2"]
    cfg = compose_train_config([
        *algo, "env=CartPole-v1", "env.num_envs=2", "total_timesteps=1024", "algo.hidden_sizes=[16]",
        "eval.episodes=2", "eval.num_envs=2", "logger=none", "progress=off", "checkpoint.freq=0",
        "env.normalize_obs=true", "env.normalize_reward=true"])
    collective = join(world, torch.device("cpu"))
    runner = Runner(cfg, run_dir, collective=collective)
    seen = {"equal": [], "updates": 0, "obs_mean_equal": []}

    def probe(state) -> None:
        seen["updates"] += 1
        flat = torch.cat([p.detach().reshape(-1) for p in runner.algo.policy.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(world.size)]
        dist.all_gather(gathered, flat)
        seen["equal"].append(all(torch.equal(gathered[0], g) for g in gathered))
        if mode == "nan" and world.rank == 1 and seen["updates"] == 3:
            state.metrics["train/loss"] = math.nan

    def after(state) -> None:
        mean = runner.env.env.rms.mean if hasattr(runner.env, "env") else None
        if mean is not None:
            gathered = [torch.empty_like(mean) for _ in range(world.size)]
            dist.all_gather(gathered, mean)
            seen["obs_mean_equal"].append(all(torch.equal(gathered[0], g) for g in gathered))
        if mode == "stop" and world.rank == 1 and seen["updates"] == 3:
            state.stop, state.stop_reason = True, "probe"

    runner.add_callback("post_update", probe)
    runner.add_callback("post_iteration", after)
    try:
        result = runner.run()
        seen["result"] = {k: v for k, v in result.items() if isinstance(v, (int, float, str))}
    except TrainingError as exc:
        seen["error"] = str(exc)
    seen["global_step"] = runner.state.global_step
    if world.is_main:
        with open(out, "w") as f:
            json.dump(seen, f)
    collective.close()


if __name__ == "__main__":
    main()
