"""Runs whose algorithm has no seed dimension, seen by the loops as a batch: each member's own
algorithm, in turn (`OnPolicyMembers`, `OffPolicyMembers`; inputs and outputs `[S, N, ...]`).

The loops (`runner/on_policy.py`, `runner/off_policy.py`) drive a batch of runs through one
algorithm object whose inputs carry a leading seed dimension. A stacked algorithm
(`PPO.stack`, ...) is one such object. These classes are the other: a single run is a batch of
one member, its algorithm called as it always is (its numbers unchanged); and a seed batch whose
networks cannot be stacked (a recurrent core, gSDE, an image or shared encoder, a MultiDiscrete /
MultiBinary head, `nets/seeded.py` `check_stackable`) or whose algorithm has no `stack` runs each
seed's own algorithm in turn, with that seed's random state swapped into the process-wide
generators while it draws (`streams`). Each seed then computes exactly what its single run
computes; what it does not get is the batched matrix products.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import torch

from rltrain import obs as obs_ops
from rltrain.errors import UserError
from rltrain.types import EnvSpec, Metrics, RolloutBatch, TransitionBatch


class Streams(Protocol):
    """Where each member draws (`seed_batch/rng.py` `SeedStreams`)."""

    def as_global(self, k: int) -> contextlib.AbstractContextManager[None]: ...


class OwnGenerators:
    """A single run's draws: the process-wide generators, as they are."""

    NOTHING = contextlib.nullcontext()

    def as_global(self, k: int) -> contextlib.AbstractContextManager[None]:
        return self.NOTHING


def _check_obs(members: list[Any], spec: EnvSpec) -> None:
    """A seed batch stores its observations as one tensor: Dict / Tuple ones are refused."""
    if spec.obs_entries and len(members) > 1:
        raise UserError("num_seeds > 1 cannot batch Dict or Tuple observations yet; use "
                        "num_seeds=1, or seeds_per_trial=N to train the seeds in turn")


def act_inputs(mask: torch.Tensor | None, starts: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The optional inputs of an on-policy `algo.act`: only those this env and algorithm need,
    so an algorithm without masks or memory keeps the plain `act(obs)`."""
    inputs = {}
    if mask is not None:
        inputs["action_mask"] = mask
    if starts is not None:
        inputs["episode_starts"] = starts
    return inputs


def random_actions(spec: EnvSpec, device: torch.device,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform random actions for every env: indices for Discrete (among the valid ones when
    `mask` [N, n] is given), [-1, 1] for Box."""
    if mask is not None:
        return torch.multinomial(mask.float(), 1).squeeze(-1)
    if spec.action_kind == "discrete":
        return torch.randint(0, spec.action_dim, (spec.num_envs,), device=device)
    return torch.rand((spec.num_envs, spec.action_dim), device=device) * 2.0 - 1.0


def seed_rows(x: Any, k: int) -> Any:
    """Seed k's part of a batch field `[S, ...]` (per entry for Dict observations; None stays)."""
    return None if x is None else obs_ops.take(x, k)


class OnPolicyMembers:
    """`act`, `value` and `update` for S on-policy members, one member at a time
    (inputs `[S, N, ...]`); `recurrent`: the members keep memory (they take episode starts)."""

    def __init__(self, members: list[Any], spec: EnvSpec, streams: Streams | None = None):
        _check_obs(members, spec)
        self.members, self.streams = members, streams or OwnGenerators()
        self.recurrent = bool(getattr(members[0], "recurrent", False))

    def act(self, obs: Any, mask: torch.Tensor | None = None,
            starts: torch.Tensor | None = None,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log_prob, value), each `[S, N, ...]`: seed k's member acts on `obs[k]`
        (`mask[k]`, `starts[k]` when given) with its own random state."""
        out = []
        for k, algo in enumerate(self.members):
            inputs = ({} if mask is None and starts is None
                      else act_inputs(seed_rows(mask, k), seed_rows(starts, k)))
            with self.streams.as_global(k):
                out.append(algo.act(seed_rows(obs, k), **inputs))
        action, log_prob, value = (obs_ops.stack(list(column)) for column in zip(*out, strict=True))
        return action, log_prob, value

    @torch.no_grad()
    def value(self, obs: Any, starts: torch.Tensor | None = None,
              rows: torch.Tensor | None = None) -> torch.Tensor:
        """V `[S, N]`. With memory, from each member's state after its last step (`starts[k]`:
        the rows whose state is zeroed first), as its single run asks. `rows` (bool `[S, N]`):
        only these rows are wanted (the others are 0), and only they go through the network,
        as a single run evaluates them (a matrix product over fewer rows can round differently)."""
        out = []
        for k, algo in enumerate(self.members):
            own = seed_rows(obs, k)
            if rows is not None:
                cut = torch.zeros(rows.shape[1:], device=rows.device)
                cut[rows[k]] = algo.value(obs_ops.take(own, rows[k]))
                out.append(cut)
            else:
                out.append(algo.value(own) if starts is None
                           else algo.value(own, episode_starts=starts[k]))
        return obs_ops.stack(out)

    def update(self, batch: RolloutBatch, progress_remaining: float = 1.0) -> list[Metrics]:
        """Each member's update on its own rollout (`batch` fields `[S, T*N, ...]`), drawing
        its minibatch order from its own stream; one metrics dict per seed."""
        metrics = []
        for k, algo in enumerate(self.members):
            own = RolloutBatch(*(seed_rows(x, k) for x in batch))
            with self.streams.as_global(k):
                metrics.append(algo.update(own, progress_remaining=progress_remaining))
        return metrics


class OffPolicyMembers:
    """`random_actions`, `act` and `update` for S off-policy members, one member at a
    time (inputs `[S, N, ...]`; each seed's minibatch is sampled from its own replay with its own
    stream by the loop, as its single run samples it)."""

    def __init__(self, members: list[Any], spec: EnvSpec, device: torch.device,
                 streams: Streams | None = None):
        _check_obs(members, spec)
        self.members, self.spec, self.device = members, spec, device
        self.streams = streams or OwnGenerators()

    def random_actions(self, num_envs: int, masks: torch.Tensor | None = None) -> torch.Tensor:
        """Each seed's uniform warm-up actions `[S, N, ...]`, drawn as its single run draws them."""
        out = []
        for k in range(len(self.members)):
            with self.streams.as_global(k):
                out.append(random_actions(self.spec, self.device, seed_rows(masks, k)))
        return obs_ops.stack(out)

    def act(self, obs: Any, global_step: int, masks: torch.Tensor | None = None) -> torch.Tensor:
        """Seed k's member acts on `obs[k]` (with `masks[k]`: DQN's valid actions)."""
        out = []
        for k, algo in enumerate(self.members):
            extra = {} if masks is None else {"action_mask": masks[k]}
            with self.streams.as_global(k):
                out.append(algo.act(seed_rows(obs, k), global_step, **extra))
        return obs_ops.stack(out)

    def update(self, batch: TransitionBatch, global_step: int) -> list[Metrics]:
        """Each member's gradient step on its own minibatch (`batch` fields `[S, B, ...]`)."""
        metrics = []
        for k, algo in enumerate(self.members):
            own = TransitionBatch(*(seed_rows(x, k) for x in batch))
            with self.streams.as_global(k):
                metrics.append(algo.update(own, global_step))
        return metrics
