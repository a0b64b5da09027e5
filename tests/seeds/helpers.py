"""Build the members of a seed batch (PPO objects, one per seed) without a Runner; run a
batch and each of its seeds alone, metric by metric."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rltrain.config.compose import compose_train_config
from rltrain.config.registry import get_algo_spec
from rltrain.envs.make import make_env
from rltrain.runner.runner import Runner
from rltrain.seeds.rng import SeedStreams
from rltrain.seeds.runner import SeedRunner


def ppo_members(env_id: str, seeds: int, *overrides: str):
    """(members, streams, spec): `seeds` PPO objects built under seeds 0..S-1, and their streams."""
    cfg = compose_train_config(["algo=ppo", f"env={env_id}", "algo.hidden_sizes=[16, 16]",
                                *overrides])
    env = make_env(cfg.env, torch.device("cpu"))
    spec = env.spec
    env.close()
    streams, members = SeedStreams(), []
    for seed in range(seeds):
        torch.manual_seed(seed)
        members.append(get_algo_spec("ppo").build(cfg.algo, spec, "cpu"))
        streams.capture()
    return members, streams, spec


def _recorder(runner: Runner, event: str) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    runner.add_callback(event, lambda state: rows.append(dict(state.metrics)))
    return rows


def assert_batch_matches_single_runs(cfg, tmp_path, updates: int, rel: float = 1e-5) -> None:
    """Train `cfg` (num_seeds > 1) as a batch, then each of its seeds alone: every logged
    metric of each update within a relative `rel` (0: equal), and `updates` updates on both
    sides."""
    event = "post_iteration" if cfg.algo.name in ("ppo", "a2c") else "post_update"
    batch = SeedRunner(cfg, tmp_path / "batch")
    batched = [_recorder(r, event) for r in batch.runners]
    batch.run()
    for k, seed in enumerate(batch.seeds):
        single = Runner(dataclasses.replace(cfg, seed=seed, num_seeds=1), tmp_path / f"single{k}")
        alone = _recorder(single, event)
        single.run()
        assert len(alone) == len(batched[k]) == updates
        # the parameters each seed ended with (networks, targets, log α): its single run's
        for name, value in _parameters(single.algo).items():
            torch.testing.assert_close(_parameters(batch.runners[k].algo)[name], value,
                                       rtol=max(rel, 1e-6) * 10, atol=1e-6,
                                       msg=lambda m, n=name, s=seed: f"seed {s}, {n}: {m}")
        for update, (mine, theirs) in enumerate(zip(batched[k], alone, strict=True)):
            assert mine.keys() == theirs.keys()
            for name, value in theirs.items():
                if name.startswith("time/") or (math.isnan(value) and math.isnan(mine[name])):
                    continue
                assert mine[name] == pytest.approx(value, rel=rel, abs=1e-6 if rel else 0), \
                    f"seed {seed}, update {update}: {name} {mine[name]} vs alone {value}"


def _parameters(algo) -> dict[str, torch.Tensor]:
    """Every network parameter and tensor the algorithm holds, by name (`policy.*`, `q_target.*`,
    `log_alpha`...), from its state dict (optimizer states left out)."""
    out = {}
    for part, value in algo.state_dict().items():
        if isinstance(value, torch.Tensor):
            out[part] = value
        elif isinstance(value, dict) and "optimizer" not in part and "state" not in value:
            out.update({f"{part}.{k}": v for k, v in value.items() if isinstance(v, torch.Tensor)})
    return out
