"""A synthetic rollout for the on-policy algorithms' unit tests (A2C, TRPO): random observations
and rewards, acted by the algorithm itself, finished with GAE."""

from __future__ import annotations

from typing import Any

import torch

from rltrain.buffers.rollout import RolloutBuffer
from rltrain.types import RolloutBatch


def make_rollout(algo: Any, n_steps: int, gae_lambda: float) -> RolloutBatch:
    """`n_steps` of `algo.act` on random observations (seeded), no episode ends, rewards
    N(0, 1), bootstrapped from `algo.value` of a random last observation."""
    spec = algo.spec
    discrete = spec.action_kind == "discrete"
    buf = RolloutBuffer(n_steps, spec.num_envs, spec.obs_shape,
                        () if discrete else (spec.action_dim,),
                        torch.long if discrete else torch.float32, torch.device("cpu"))
    g = torch.Generator().manual_seed(2)
    no = torch.zeros(spec.num_envs, dtype=torch.bool)
    for _ in range(n_steps):
        obs = torch.randn(spec.num_envs, *spec.obs_shape, generator=g)
        action, log_prob, value = algo.act(obs)
        buf.add(obs, action, log_prob, value, torch.randn(spec.num_envs, generator=g), no, no)
    return buf.finish(algo.value(torch.randn(spec.num_envs, *spec.obs_shape, generator=g)),
                      0.99, gae_lambda)
