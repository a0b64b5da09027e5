"""Recurrent rollouts: the hidden state and episode starts each acting step saw, and minibatches
of whole sequences for truncated backpropagation through time.

A rollout of T steps x N envs is cut, per env, into T / S sequences of S steps (S = `PPOConfig.sequence_len`,
or T for a last, shortened rollout that S does not divide). A sequence starts from the state stored at its first step; inside it, the state is
zeroed wherever an episode starts, exactly as acting did. The rows of the flattened
`RolloutBatch` are `t * N + n`, so a sequence's rows are found by arithmetic, not copied.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class SequenceBatch(NamedTuple):
    """M sequences of S steps: `rows` `[S * M]` (time-major) into the flattened rollout, the
    initial states `[L, M, D]` and the episode starts `[S, M]`."""

    rows: torch.Tensor
    state: torch.Tensor
    starts: torch.Tensor


class RecurrentMemory:
    """What each acting step of the current rollout fed the core: state `[L, N, D]` and starts
    `[N]`. Filled by `record`, emptied by `take` (once per update)."""

    def __init__(self) -> None:
        self.states: list[torch.Tensor] = []
        self.starts: list[torch.Tensor] = []

    def record(self, state: torch.Tensor, starts: torch.Tensor) -> None:
        self.states.append(state)
        self.starts.append(starts)

    def take(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(states `[T, L, N, D]`, starts `[T, N]`) of the rollout; the memory is emptied."""
        assert self.states, "an update without a recorded rollout"
        out = torch.stack(self.states), torch.stack(self.starts)
        self.states, self.starts = [], []
        return out


def sequence_length(steps: int, bptt_len: int) -> int:
    """S: `bptt_len` when it divides the rollout's `steps`, else the whole rollout (a last,
    shortened rollout of the run)."""
    return bptt_len if 0 < bptt_len <= steps and steps % bptt_len == 0 else steps


def sequence_minibatches(states: torch.Tensor, starts: torch.Tensor, seq_len: int,
                         batch_size: int) -> list[SequenceBatch]:
    """One epoch's minibatches, each of `batch_size // seq_len` (at least 1) whole sequences in
    random order; every sequence of the rollout appears once."""
    t_len, n = starts.shape
    chunks = t_len // seq_len
    per_batch = max(1, batch_size // seq_len)
    order = torch.randperm(chunks * n, device=starts.device)
    offsets = torch.arange(seq_len, device=starts.device)
    out = []
    for i in range(0, len(order), per_batch):
        ids = order[i:i + per_batch]
        chunk, env = ids // n, ids % n
        times = (chunk * seq_len).unsqueeze(1) + offsets  # [M, S]
        rows = (times * n + env.unsqueeze(1)).t().reshape(-1)  # time-major [S * M]
        state = states[chunk * seq_len, :, env].transpose(0, 1)  # [L, M, D]
        out.append(SequenceBatch(rows, state, starts[times, env.unsqueeze(1)].t()))
    return out
