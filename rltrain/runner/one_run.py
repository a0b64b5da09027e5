"""A single run as the loops see every batch of runs: a batch of one (`context.LoopBatch`).

Its algorithm keeps no seed dimension: the loops call it through `runner/members.py` with S = 1,
passing the run's own tensors (a list of one), so every call is the one a single run makes (its
numbers are its own, bit for bit, with no view or copy added), and any network trains this way:
recurrent, image, Dict observations, torchrun's data-parallel ranks.
"""

from __future__ import annotations

from typing import Any

import torch

from rltrain.algos.configs.base import OnPolicyConfig
from rltrain.runner.context import LoopContext
from rltrain.runner.members import OffPolicyMembers, OnPolicyMembers
from rltrain.types import StepResult


class OneRun:
    """The run of `ctx` as a batch of one: its hooks are the Runner's (`ctx.fire`,
    `ctx.end_iteration`), its replay samples from the process-wide generator."""

    def __init__(self, ctx: LoopContext):
        self.ctx, self.ctxs = ctx, [ctx]
        self.fire = ctx.fire  # the Runner's own hook, called directly (5 events an env step off-policy)
        self.generators: list[torch.Generator | None] = [None]
        spec = ctx.env.spec
        self.algo: Any = (OnPolicyMembers([ctx.algo], spec) if isinstance(ctx.cfg, OnPolicyConfig)
                          else OffPolicyMembers([ctx.algo], spec, ctx.device))

    def finished(self) -> bool:
        state = self.ctx.state
        return state.global_step >= state.total_timesteps or state.stop

    def step_envs(self, actions: Any) -> list[StepResult]:
        return [self.ctx.env.step(actions[0])]

    def end_iteration(self) -> list[int]:
        self.ctx.end_iteration()  # a fault here is the run's: it ends the loop
        return [0]
