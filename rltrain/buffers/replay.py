"""Replay memory for off-policy algorithms: a preallocated ring buffer on the training device."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from rltrain import obs as obs_ops
from rltrain.buffers.choice import BadState
from rltrain.errors import UserError
from rltrain.types import TransitionBatch


def available_memory(device: torch.device) -> int | None:
    """Bytes that can still be allocated on `device` (Linux MemAvailable, CUDA free memory);
    None when unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def obs_storage_dtype(dtype: torch.dtype) -> torch.dtype:
    """How buffers store observations the env gives as `dtype`: uint8 pixels stay uint8 and
    categorical entries int64 (the network converts both on the device), everything else is
    float32."""
    if dtype in (torch.uint8, torch.int64):
        return dtype
    return torch.float32


def check_memory(capacity: int, obs_shape: tuple[int, ...] | obs_ops.Layout, device: torch.device,
                 obs_dtype: torch.dtype = torch.float32, copies: int = 2,
                 item: str = "observations") -> None:
    """Refuse, with one line, a replay whose observations alone would not fit in memory (image
    observations at the default `buffer_size` would: the OS kills the process instead).
    `copies` observations of `obs_shape` per transition (obs and next_obs), of `obs_dtype`'s
    real element size (a Dict observation's layout: the sum over its entries); `item` names
    them in the message (the frame replay stores single frames, not observations)."""
    layout = obs_shape if isinstance(obs_shape, dict) else {"": (tuple(obs_shape), obs_dtype)}
    per_obs = sum(torch.empty((), dtype=d).element_size() * math.prod(s)
                  for s, d in layout.values())
    need = copies * capacity * per_obs
    free = available_memory(device)
    if free is not None and need > free:
        shown = ({k: list(s) for k, (s, _) in layout.items()} if isinstance(obs_shape, dict)
                 else list(obs_shape))
        raise UserError(f"replay buffer: {capacity:,} transitions of {item} "
                        f"{shown} need {need / 2**30:.1f} GiB on {device}, "
                        f"{free / 2**30:.1f} GiB is available: lower algo.buffer_size")


def replay_actions(spec: Any) -> tuple[tuple[int, ...], torch.dtype]:
    """(shape, dtype) of one stored action: an index for Discrete, a vector for Box."""
    if spec.action_kind == "discrete":
        return (), torch.long
    return (spec.action_dim,), torch.float32


class ReplayBuffer:
    """Stores transitions `(obs, action, reward, next_obs, terminated)` in a ring of `capacity`.

    `next_obs` is the true next observation (`StepResult.final_obs`), so a transition never pairs
    the last observation of an episode with the first of the next; `terminated` alone removes the
    bootstrap, so time-limit truncations still bootstrap. A batched `add` of N rows (one per env)
    writes N consecutive slots, wrapping around the end. Observations are stored as
    `obs_dtype` (uint8 for pixel envs, see `obs_storage_dtype`) and sampled as stored.
    """

    STATE: dict[str, tuple] = {
        "obs": ("obs",), "next_obs": ("obs",), "actions": ("tensor",), "rewards": ("tensor",),
        "terminated": ("tensor",), "pos": ("int", 0), "size": ("int", 0)}
    """What `state_dict()` holds: field -> kind (`checkpoint/payload.py` reads it); the
    optional `next_masks` ([size, n] bool, a masked env) is read when it fits."""
    ROWS = ("obs", "next_obs", "actions", "rewards", "terminated")
    """The fields of `size` rows each."""

    @classmethod
    def build(cls, spec: Any, cfg: Any, device: torch.device,
              obs_dtype: torch.dtype | dict[str, torch.dtype] | None = None) -> ReplayBuffer:
        """The empty buffer of `cfg.buffer_size` transitions for the env `spec`: observations
        stored as `obs_storage_dtype` says (one tensor per entry of a Dict observation)."""
        action_shape, action_dtype = replay_actions(spec)
        if spec.obs_entries:
            dtypes = obs_dtype if isinstance(obs_dtype, dict) else {}
            layout = {e.key: (e.obs_shape, obs_storage_dtype(dtypes.get(e.key, torch.float32)))
                      for e in spec.obs_entries}
            return cls(cfg.buffer_size, layout, action_shape, action_dtype, device)
        if obs_dtype is None or isinstance(obs_dtype, dict):
            obs_dtype = torch.uint8 if spec.pixels else torch.float32
        return cls(cfg.buffer_size, spec.obs_shape, action_shape, action_dtype, device,
                   obs_dtype=obs_storage_dtype(obs_dtype))

    @classmethod
    def check_state(cls, state: dict[str, Any]) -> None:
        """`BadState` unless every row field holds `size` rows."""
        for name in cls.ROWS:
            parts = state[name].items() if isinstance(state[name], dict) else [("", state[name])]
            for entry, tensor in parts:
                if len(tensor) != state["size"]:
                    raise BadState(f"{name}{'.' + entry if entry else ''}",
                                   f"has {len(tensor)} rows, expected size={state['size']}")

    @classmethod
    def fit_rows(cls, state: dict[str, Any], spec: Any, obs_rows: Callable[..., dict]) -> dict:
        """(saved tensor, the shape the env `spec` needs) per field (`obs_rows(name, saved,
        spec, lead)`: the same for observations, per entry of a Dict one)."""
        n, (action, _) = state["size"], replay_actions(spec)
        rows: dict[str, tuple] = {}
        for name in ("obs", "next_obs"):
            rows.update(obs_rows(name, state[name], spec, (n,)))
        for name, shape in (("actions", action), ("rewards", ()), ("terminated", ())):
            rows[name] = (state[name], (n, *shape))
        return rows

    def __init__(self, capacity: int, obs_shape: tuple[int, ...] | obs_ops.Layout,
                 action_shape: tuple[int, ...], action_dtype: torch.dtype,
                 device: torch.device | str = "cpu", obs_dtype: torch.dtype = torch.float32):
        """`obs_shape` with `obs_dtype`, or a Dict observation's layout `{key: (shape, dtype)}`
        (`rltrain/obs.py`): one tensor per entry."""
        if capacity <= 0:
            raise ValueError(f"replay capacity must be > 0, got {capacity}")
        self.capacity, self.device = int(capacity), torch.device(device)
        c = self.capacity
        check_memory(c, obs_shape, self.device, obs_dtype)
        layout = obs_shape if isinstance(obs_shape, dict) else (tuple(obs_shape), obs_dtype)
        self.obs = obs_ops.zeros((c,), layout, self.device)
        self.next_obs = obs_ops.zeros((c,), layout, self.device)
        self.actions = torch.zeros((c, *action_shape), dtype=action_dtype, device=self.device)
        self.rewards = torch.zeros(c, dtype=torch.float32, device=self.device)
        self.terminated = torch.zeros(c, dtype=torch.float32, device=self.device)
        self.next_masks: torch.Tensor | None = None  # [C, n] bool, on the first masked add
        self.pos = 0  # next slot to write
        self.size = 0  # filled slots

    @property
    def nbytes(self) -> int:
        """Bytes held by the preallocated storage."""
        tensors = (self.actions, self.rewards, self.terminated,
                   *(() if self.next_masks is None else (self.next_masks,)))
        return (obs_ops.nbytes(self.obs) + obs_ops.nbytes(self.next_obs)
                + sum(t.element_size() * t.numel() for t in tensors))

    def add(self, obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor,
            next_obs: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor | None = None, next_mask: torch.Tensor | None = None) -> None:
        """Append a batch of N transitions (leading dimension N); `truncated` (the rows a time
        limit ended) is not stored: a truncated transition bootstraps, and only a replay that
        keeps episodes (`her.py`) reads it; `next_mask` [N, n]: valid actions at `next_obs`
        (a masked env)."""
        n = obs_ops.rows(obs)
        # a slice where the rows fit before the end (a view copy, ~4x cheaper than index_put_
        # for one row), indices that wrap around otherwise
        idx: slice | torch.Tensor = (
            slice(self.pos, self.pos + n) if self.pos + n <= self.capacity
            else (self.pos + torch.arange(n, device=self.device)) % self.capacity)
        if next_mask is not None:
            self._masks(next_mask.shape[1])[idx] = next_mask
        obs_ops.put(self.obs, idx, obs)
        self.actions[idx] = action
        self.rewards[idx] = reward
        obs_ops.put(self.next_obs, idx, next_obs)
        self.terminated[idx] = terminated.float()
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> TransitionBatch:
        """Uniform sample with replacement from the filled slots."""
        if self.size == 0:
            raise RuntimeError("sample() from an empty replay buffer")
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        masks = None if self.next_masks is None else self.next_masks[idx]
        return TransitionBatch(obs_ops.take(self.obs, idx), self.actions[idx],
                               self.rewards[idx], obs_ops.take(self.next_obs, idx),
                               self.terminated[idx], masks)

    def _masks(self, n_actions: int) -> torch.Tensor:
        """The `[C, n]` next-state mask storage, made (all valid) on first use."""
        if self.next_masks is None:
            self.next_masks = torch.ones((self.capacity, n_actions), dtype=torch.bool,
                                         device=self.device)
        return self.next_masks

    def state_dict(self) -> dict:
        """Filled contents and ring position (for checkpoints that save the buffer)."""
        n = self.size
        head = lambda t: t[:n].cpu()  # noqa: E731
        return {"obs": obs_ops.apply(head, self.obs), "next_obs": obs_ops.apply(head, self.next_obs),
                "actions": self.actions[:n].cpu(), "rewards": self.rewards[:n].cpu(),
                "terminated": self.terminated[:n].cpu(), "pos": self.pos, "size": n,
                **({} if self.next_masks is None else {"next_masks": self.next_masks[:n].cpu()})}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` into a buffer of at least the same capacity."""
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(f"saved replay holds {n} transitions, capacity is {self.capacity}")
        for name in ("obs", "next_obs", "actions", "rewards", "terminated"):
            target = getattr(self, name)  # a dict of entries for Dict observations: by key
            obs_ops.put(target, slice(None, n), obs_ops.apply(
                lambda t, saved: saved.to(self.device, t.dtype), target, state[name]))
        masks = state.get("next_masks")
        if isinstance(masks, torch.Tensor) and masks.dim() == 2 and len(masks) == n:
            self._masks(masks.shape[1])[:n] = masks.to(self.device, torch.bool)
        self.pos, self.size = int(state["pos"]) % self.capacity, n
