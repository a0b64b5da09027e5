"""Build the members of a seed batch (PPO objects, one per seed) without a Runner."""

from __future__ import annotations

import torch

from rltrain.compose import compose_train_config
from rltrain.envs.make import make_env
from rltrain.registry import get_algo_spec
from rltrain.seeds.rng import SeedStreams


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
