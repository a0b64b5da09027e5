"""Seed k of a stacked batch algorithm, as its Runner reads its single run's algorithm: with no
copy kept anywhere, so nothing is ever out of date and nothing needs copying back.

Its networks (each network attribute of the batch's algorithm, `policy` too) are modules of the
single run's structure whose tensors are the batch's slices `[k]` (`nets/seeded.py`
`seed_view`): evaluation and the checks of weights read the batch's current weights. Its
`state_dict()` is the batch algorithm's with every tensor sliced `[k]` (`seed_state`): in a
stacked algorithm every tensor has the seeds as its leading dimension (networks, optimizer
moments, Adam's step counts `[S]`, SAC's log α), and every other value (update counters,
schedules) is shared by the seeds, which step in lockstep. So a seed's checkpoint is its
single run's, loaded by `eval`, `export` and `resume=` as any other.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rltrain.nets.seeded import seed_view


def seed_state(state: Any, k: int) -> Any:
    """`state` (a batch algorithm's `state_dict()`) with each tensor `t` as `t[k]`, a copy laid
    out as a single run's; everything else as it is."""
    if isinstance(state, torch.Tensor):
        return state[k].clone(memory_format=torch.contiguous_format)
    if isinstance(state, dict):
        return {key: seed_state(value, k) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(seed_state(value, k) for value in state)
    return state


class SeedView:
    """Seed k of `batch` (a stacked algorithm: `DQN.stack`, `PPO.stack`, ...); `member` is the
    seed's own algorithm object it was built from, whose other attributes (its config, its env
    spec) it answers with."""

    def __init__(self, batch: Any, k: int, member: Any):
        self.batch, self.k, self.member = batch, k, member
        views: dict[int, nn.Module] = {}
        for name, value in vars(batch).items():
            if isinstance(value, nn.Module) and hasattr(value, "seeds"):
                if id(value) not in views:
                    views[id(value)] = seed_view(value, k)
                setattr(self, name, views[id(value)])

    def state_dict(self) -> dict[str, Any]:
        """Seed k's state in its single run's layout."""
        return seed_state(self.batch.state_dict(), self.k)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise TypeError("a seed of a running batch is not loaded: each seed's state is loaded "
                        "into its own algorithm before the batch is stacked from them")

    def __getattr__(self, name: str) -> Any:  # only names not set above: the member's
        if name.startswith("__") or name in ("batch", "k", "member"):
            raise AttributeError(name)
        return getattr(self.member, name)
