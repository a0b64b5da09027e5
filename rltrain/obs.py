"""Observations are a tensor, or, for Dict and Tuple spaces, a flat dict of tensors (one per
entry, see `EnvSpec.obs_entries`). These few functions are everything buffers, loops,
checkpoints and export do to an observation batch, written once for both forms.

A Tuple space's entries are named "0", "1", ...; nested Dict/Tuple spaces flatten to dotted
keys ("robot.joints"), so every entry is one tensor with the batch as its first dimension.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Obs = torch.Tensor | dict[str, torch.Tensor]
"""A batch of observations: `[B, *shape]`, or `{key: [B, *shape_key]}`."""

Shape = tuple[int, ...]
Layout = tuple[Shape, torch.dtype] | dict[str, tuple[Shape, torch.dtype]]
"""What one observation is made of: (shape, dtype), or {key: (shape, dtype)}."""


def apply(fn: Callable[..., torch.Tensor], obs: Obs, *others: Obs) -> Obs:
    """`fn` on the tensor, or on each entry (with the same entry of each of `others`)."""
    if isinstance(obs, dict):
        return {k: fn(v, *(o[k] for o in others)) for k, v in obs.items()}
    return fn(obs, *others)


def tensors(obs: Obs) -> list[torch.Tensor]:
    """The tensor(s) of `obs`, in entry order."""
    return list(obs.values()) if isinstance(obs, dict) else [obs]


def rows(obs: Obs) -> int:
    """The batch size (first dimension)."""
    return tensors(obs)[0].shape[0]


def device(obs: Obs) -> torch.device:
    """Where `obs` lives."""
    return tensors(obs)[0].device


def take(obs: Obs, index: Any) -> Obs:
    """`obs[index]`, entry by entry."""
    return {k: v[index] for k, v in obs.items()} if isinstance(obs, dict) else obs[index]


def stack(parts: list[Obs]) -> Obs:
    """The batches `parts` stacked on a new first dimension, entry by entry; a single part is
    viewed `[1, ...]` (no copy)."""
    if isinstance(parts[0], dict):
        return {k: stack([p[k] for p in parts]) for k in parts[0]}
    return parts[0].unsqueeze(0) if len(parts) == 1 else torch.stack(parts)


def join(parts: Sequence[Obs]) -> Obs:
    """Every run's `[N, ...]` rows as one `[S*N, ...]`, entry by entry: run k's rows are
    k*N ... k*N + N - 1; a single part is returned as it is (no copy)."""
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], dict):
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    return torch.cat(list(parts))


def put(store: Obs, index: Any, value: Obs) -> None:
    """`store[index] = value`, entry by entry."""
    if isinstance(store, dict):
        for k, v in store.items():
            v[index] = value[k]
    else:
        store[index] = value


def layout(obs: Obs, storage: Callable[[torch.dtype], torch.dtype] = lambda d: d) -> Layout:
    """The (shape, dtype) of one observation of the batch `obs`, per entry for a dict;
    `storage` maps each dtype to the one it is stored as."""
    if isinstance(obs, dict):
        return {k: (tuple(v.shape[1:]), storage(v.dtype)) for k, v in obs.items()}
    return tuple(obs.shape[1:]), storage(obs.dtype)


def zeros(lead: tuple[int, ...], of: Layout, device: torch.device | str) -> Obs:
    """Zeros `[*lead, *shape]` for each entry of the layout `of`."""
    if isinstance(of, dict):
        return {k: torch.zeros((*lead, *s), dtype=d, device=device) for k, (s, d) in of.items()}
    shape, dtype = of
    return torch.zeros((*lead, *shape), dtype=dtype, device=device)


def nbytes(obs: Obs) -> int:
    """Bytes the tensor(s) hold."""
    return sum(t.element_size() * t.numel() for t in tensors(obs))


def cpu_copy(obs: Obs) -> Obs:
    """A detached CPU copy (checkpoints)."""
    return apply(lambda t: t.detach().cpu().clone(), obs)
