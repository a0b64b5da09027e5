"""Runs whose algorithm has no seed dimension, seen by the loops as a batch: each member's own
algorithm, in turn (`OnPolicyMembers`, `OffPolicyMembers`).

The loops (`runner/on_policy.py`, `runner/off_policy.py`) drive a batch of S runs through one
algorithm object, passing and receiving every per-step value as a sequence of S, one entry per
run (run k's observations `obs[k]` `[N, ...]`, its actions `action[k]`, its minibatch
`batches[k]`). A stacked algorithm (`PPO.stack`, ...) is called through
`seed_batch/stacked_calls.py`, which stacks them `[S, N, ...]`. These classes are the other
form: a single run is a batch of one member, its algorithm called as it always is, with its own
tensors (no view, no copy: its numbers and its speed are its own); and a seed batch whose
networks cannot be stacked (a recurrent core, gSDE, an image or shared encoder, a MultiDiscrete /
MultiBinary head, `nets/seeded.py` `check_stackable`) or whose algorithm has no `stack` runs each
seed's own algorithm in turn, with that seed's random state swapped into the process-wide
generators while it draws (`streams`). Each seed then computes exactly what its single run
computes; what it does not get is the batched matrix products.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
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


def nth(runs: Sequence[Any] | None, k: int) -> Any:
    """Run k's entry of a per-run sequence, or None when the sequence is not given."""
    return None if runs is None else runs[k]


PerRun = Sequence[torch.Tensor]
"""One tensor per run, in the batch's order (a per-run value the loops pass or receive)."""


class OnPolicyMembers:
    """`act`, `value` and `update` for S on-policy members, one member at a time (inputs and
    outputs per run); `recurrent`: the members keep memory (they take episode starts)."""

    def __init__(self, members: list[Any], spec: EnvSpec, streams: Streams | None = None):
        _check_obs(members, spec)
        self.members, self.streams = members, streams or OwnGenerators()
        self.recurrent = bool(getattr(members[0], "recurrent", False))

    def act(self, obs: Sequence[Any], mask: PerRun | None = None, starts: PerRun | None = None,
            ) -> tuple[PerRun, PerRun, PerRun]:
        """(actions, log_probs, values), each per run: seed k's member acts on `obs[k]`
        (`mask[k]`, `starts[k]` when given) with its own random state."""
        plain = mask is None and starts is None
        out = []
        for k, algo in enumerate(self.members):
            inputs = {} if plain else act_inputs(nth(mask, k), nth(starts, k))
            with self.streams.as_global(k):
                out.append(algo.act(obs[k], **inputs))
        action, log_prob, value = zip(*out, strict=True)
        return action, log_prob, value

    @torch.no_grad()
    def value(self, obs: Sequence[Any], starts: PerRun | None = None,
              rows: PerRun | None = None) -> list[torch.Tensor]:
        """V `[N]` per run. With memory, from each member's state after its last step
        (`starts[k]`: the rows whose state is zeroed first), as its single run asks. `rows`
        (bool `[N]` per run): only these rows are wanted (the others are 0), and only they go
        through the network, as a single run evaluates them (a matrix product over fewer rows
        can round differently)."""
        out = []
        for k, algo in enumerate(self.members):
            if rows is not None:
                cut = torch.zeros(rows[k].shape, device=rows[k].device)
                cut[rows[k]] = algo.value(obs_ops.take(obs[k], rows[k]))
                out.append(cut)
            else:
                out.append(algo.value(obs[k]) if starts is None
                           else algo.value(obs[k], episode_starts=starts[k]))
        return out

    def update(self, batches: Sequence[RolloutBatch],
               progress_remaining: float = 1.0) -> list[Metrics]:
        """Each member's update on its own rollout (`batches[k]`, `[T*N, ...]` fields), drawing
        its minibatch order from its own stream; one metrics dict per seed."""
        metrics = []
        for k, algo in enumerate(self.members):
            with self.streams.as_global(k):
                metrics.append(algo.update(batches[k], progress_remaining=progress_remaining))
        return metrics


class OffPolicyMembers:
    """`random_actions`, `act` and `update` for S off-policy members, one member at a
    time (inputs and outputs per run; each seed's minibatch is sampled from its own replay with
    its own stream by the loop, as its single run samples it)."""

    def __init__(self, members: list[Any], spec: EnvSpec, device: torch.device,
                 streams: Streams | None = None):
        _check_obs(members, spec)
        self.members, self.spec, self.device = members, spec, device
        self.streams = streams or OwnGenerators()

    def random_actions(self, num_envs: int, masks: PerRun | None = None) -> list[torch.Tensor]:
        """Each seed's uniform warm-up actions `[N, ...]`, drawn as its single run draws them."""
        out = []
        for k in range(len(self.members)):
            with self.streams.as_global(k):
                out.append(random_actions(self.spec, self.device, nth(masks, k)))
        return out

    def act(self, obs: Sequence[Any], global_step: int,
            masks: PerRun | None = None) -> list[torch.Tensor]:
        """Seed k's member acts on `obs[k]` (with `masks[k]`: DQN's valid actions)."""
        out = []
        for k, algo in enumerate(self.members):
            extra = {} if masks is None else {"action_mask": masks[k]}
            with self.streams.as_global(k):
                out.append(algo.act(obs[k], global_step, **extra))
        return out

    def update(self, batches: Sequence[TransitionBatch], global_step: int) -> list[Metrics]:
        """Each member's gradient step on its own minibatch (`batches[k]`, `[B, ...]` fields)."""
        metrics = []
        for k, algo in enumerate(self.members):
            with self.streams.as_global(k):
                metrics.append(algo.update(batches[k], global_step))
        return metrics
