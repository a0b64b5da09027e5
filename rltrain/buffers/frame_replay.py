"""Replay memory for frame-stacked pixel envs (Atari): each frame is stored once.

A stacked observation `[k, H, W]` shares k-1 frames with the one before it, and `next_obs`
shares k-1 frames with `obs`: storing both stacks keeps every frame 2k times (8x for k=4). Here
every env row has a ring of `L` slots; slot t holds one frame, the newest of the observation the
transition starting at t was taken from, with that transition's action, reward and
`terminated`. Its next observation's newest frame is slot t+1, and both stacks are rebuilt when
sampling from the k slots up to t (t+1), zeroed before the episode's first frame exactly as
`envs/atari_vec.FrameStack` zeroes them after a reset.

Episode boundaries are read from the data, not from flags: an `add` continues a row's sequence
when its `obs` is exactly the previous `next_obs` of that row (a life loss, which `LifeLoss`
marks `terminated` while the game and its frame stack go on, continues; a reset, whether the
episode was terminated or truncated, does not). A new sequence starts in the slot after the
ended episode's final frame, which is therefore never sampled as a transition start; its first
slot is the reset frame (empty history), or, when the observation has a history (the first add
after a mid-episode resume), its k frames. A transition whose `next_obs` is not `obs` shifted
by one frame (no `FrameStack` env does that) cannot be rebuilt, and is not stored.

Sampleable slots are tracked in `valid`: set when a slot's transition is complete, cleared when
the ring overwrites the slot or any frame of its history. The newest slot of each row (its
next action is not known yet) and final-frame slots are never valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rltrain.buffers.choice import BadState
from rltrain.buffers.replay import check_memory, replay_actions
from rltrain.errors import UserError
from rltrain.types import TransitionBatch


class FrameReplayBuffer:
    """`ReplayBuffer`'s interface (`add`, `sample`, `nbytes`, `size`, `capacity`, `state_dict`,
    `load_state_dict`) for uint8 observations `[k, H, W]` stacked newest last.

    `capacity` transitions are split over `num_envs` rings of `ceil(capacity / num_envs)` slots
    (at least k + 2); `self.capacity` is the slots actually allocated. Each ended episode costs
    one slot more (its final frame). Memory: `H*W` bytes per slot plus the action, reward and
    flags (see `nbytes`).
    """

    STATE: dict[str, tuple] = {
        "frames": ("tensor", "byte", 4), "actions": ("tensor",), "rewards": ("tensor", "float"),
        "terminated": ("tensor",), "ep_pos": ("tensor", "byte", 2), "valid": ("tensor", "", 2),
        "head": ("tensor", "int", 1), "written": ("tensor", "int", 1),
        "last_next": ("tensor", "byte", 4), "has_last": ("tensor", "", 1),
        "ring": ("int", 1), "size": ("int", 0)}
    """What `state_dict()` holds: field -> kind (`checkpoint/payload.py` reads it)."""
    RINGS = ("frames", "actions", "rewards", "terminated", "ep_pos", "valid")
    """The `[N, F, ...]` fields: F written slots of each env row's ring."""

    @classmethod
    def build(cls, spec: Any, cfg: Any, device: torch.device,
              obs_dtype: Any = None) -> FrameReplayBuffer:
        """The empty rings of `cfg.buffer_size` transitions for the frame-stacked pixel env
        `spec` (`[k, H, W]` bytes); a one-line error for any other."""
        if len(spec.obs_shape) != 3 or spec.obs_entries or not spec.pixels:
            raise UserError(f"algo.replay=frames stores frame-stacked pixel observations "
                            f"[k, H, W]; this env's are {list(spec.obs_shape)}: use "
                            f"algo.replay=uniform (or auto)")
        action_shape, action_dtype = replay_actions(spec)
        return cls(cfg.buffer_size, spec.num_envs, spec.obs_shape, action_shape, action_dtype,
                   device)

    @classmethod
    def check_state(cls, state: dict[str, Any]) -> None:
        """`BadState` unless the rings share their rows and slots and the per-row fields their
        rows."""
        n, f = state["frames"].shape[:2]
        if f > state["ring"]:
            raise BadState("frames", f"has {f} slots per ring, more than ring={state['ring']}")
        for name in cls.RINGS:
            if tuple(state[name].shape[:2]) != (n, f):
                raise BadState(name, f"has shape {list(state[name].shape)}, expected "
                                     f"[{n}, {f}, ...]")
        for name in ("head", "written", "last_next", "has_last"):
            if len(state[name]) != n:
                raise BadState(name, f"has {len(state[name])} rows, expected {n}")

    @classmethod
    def fit_rows(cls, state: dict[str, Any], spec: Any, obs_rows: Callable[..., dict]) -> dict:
        """(saved tensor, the shape the env `spec` needs) per field."""
        frames, (action, _) = state["frames"], replay_actions(spec)
        return {"frames": (frames, (spec.num_envs, frames.shape[1], *spec.obs_shape[1:])),
                "last_next": (state["last_next"], (spec.num_envs, *spec.obs_shape)),
                "actions": (state["actions"], (*frames.shape[:2], *action))}

    def __init__(self, capacity: int, num_envs: int, obs_shape: tuple[int, ...],
                 action_shape: tuple[int, ...], action_dtype: torch.dtype,
                 device: torch.device | str = "cpu"):
        if capacity <= 0:
            raise ValueError(f"replay capacity must be > 0, got {capacity}")
        if len(obs_shape) != 3:
            raise ValueError(f"frame replay needs [k, H, W] observations, got {list(obs_shape)}")
        k, h, w = (int(d) for d in obs_shape)
        if not 1 <= k <= 255:
            raise ValueError(f"frame stack of {k} frames: 1 to 255 are supported")
        self.k, self.num_envs, self.device = k, int(num_envs), torch.device(device)
        self.obs_shape = (k, h, w)
        self.ring = max(-(-int(capacity) // self.num_envs), k + 2)
        self.capacity = self.ring * self.num_envs
        n, ring, dev = self.num_envs, self.ring, self.device
        check_memory(self.capacity, (h, w), dev, torch.uint8, copies=1,
                     item="frames (stored once; stacks are rebuilt when sampled)")
        # never read before written (reads are masked by `valid` and `ep_pos`): `empty` leaves
        # the pages untouched until the ring reaches them
        self.frames = torch.empty((n, ring, h, w), dtype=torch.uint8, device=dev)
        self.actions = torch.zeros((n, ring, *action_shape), dtype=action_dtype, device=dev)
        self.rewards = torch.zeros((n, ring), dtype=torch.float32, device=dev)
        self.terminated = torch.zeros((n, ring), dtype=torch.bool, device=dev)
        self.ep_pos = torch.zeros((n, ring), dtype=torch.uint8, device=dev)
        """Frames since the episode's first, capped at k-1: older slots of a stack are zeros."""
        self.valid = torch.zeros((n, ring), dtype=torch.bool, device=dev)
        self.head = torch.zeros(n, dtype=torch.long, device=dev)
        """Per row, the slot holding the newest frame of `last_next`."""
        self.written = torch.zeros(n, dtype=torch.long, device=dev)
        """Per row, slots written so far (the next one is `written % ring`)."""
        self.last_next = torch.zeros((n, k, h, w), dtype=torch.uint8, device=dev)
        self.has_last = torch.zeros(n, dtype=torch.bool, device=dev)
        self._size = torch.zeros((), dtype=torch.long, device=dev)  # valid slots, kept on device
        self._rows = torch.arange(n, device=dev)
        self._back = torch.arange(k - 1, -1, -1, device=dev)  # k-1 .. 0 frames back
        self._ahead = torch.arange(k, device=dev)

    @property
    def size(self) -> int:
        """Sampleable transitions (valid slots)."""
        return int(self._size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the preallocated storage."""
        tensors = (self.frames, self.actions, self.rewards, self.terminated, self.ep_pos,
                   self.valid, self.head, self.written, self.last_next, self.has_last)
        return sum(t.element_size() * t.numel() for t in tensors)

    # ---- writing ------------------------------------------------------------------------------

    def _write(self, rows: torch.Tensor, frames: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Write one frame per row (distinct rows) in each row's next slot; return the slots.
        The slot and the k-1 after it (whose stacks reach back to it) stop being sampleable."""
        slot = self.written[rows] % self.ring
        reach = (slot.unsqueeze(1) + self._ahead) % self.ring
        rows2 = rows.unsqueeze(1)
        self._size -= self.valid[rows2, reach].sum()
        self.valid[rows2, reach] = False
        self.frames[rows, slot] = frames
        self.ep_pos[rows, slot] = pos.to(torch.uint8)
        self.written[rows] += 1
        return slot

    def _start(self, rows: torch.Tensor, obs: torch.Tensor) -> None:
        """Begin a new sequence in `rows` with their observations `obs` `[R, k, H, W]`."""
        fresh = (obs[:, :-1] == 0).flatten(1).all(1)  # a reset stack: zeros but the newest
        if bool(fresh.any()):
            r = rows[fresh]
            self.head[r] = self._write(r, obs[fresh, -1], torch.zeros_like(r))
        if not bool(fresh.all()):
            r, o = rows[~fresh], obs[~fresh]
            for j in range(self.k):  # the whole stack, its own frames (zeros included)
                self.head[r] = self._write(r, o[:, j], torch.full_like(r, j))

    def add(self, obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor,
            next_obs: torch.Tensor, terminated: torch.Tensor,
            truncated: torch.Tensor | None = None) -> None:
        """Append one transition per env row (leading dimension `num_envs`). `next_obs` is the
        true next observation (`StepResult.final_obs`). `truncated` is not needed (boundaries
        are read from the data, see the module docstring) and is ignored."""
        n = obs.shape[0]
        if n != self.num_envs:
            raise ValueError(f"frame replay of {self.num_envs} env rows got {n} rows")
        obs, next_obs = obs.to(self.device), next_obs.to(self.device)
        same = _rows_equal(obs, self.last_next).logical_and_(self.has_last)
        if not bool(same.all()):
            new = (~same).nonzero().squeeze(1)
            self._start(new, obs[new])
        rows, h = self._rows, self.head
        shifted = _rows_equal(next_obs[:, :-1], obs[:, 1:])
        self.actions[rows, h] = action.to(self.device, self.actions.dtype)
        self.rewards[rows, h] = reward.to(self.device, torch.float32)
        self.terminated[rows, h] = terminated.to(self.device).bool()
        pos = torch.clamp(self.ep_pos[rows, h].long() + 1, max=self.k - 1)
        nxt = self._write(rows, next_obs[:, -1], pos)  # clears slots h+1..h+k, never h
        self.valid[rows, h] = shifted
        self._size += shifted.sum()
        self.head = nxt
        self.last_next.copy_(next_obs)
        self.has_last = shifted.clone()  # a row that could not be stored starts afresh

    # ---- reading ------------------------------------------------------------------------------

    def _stacks(self, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """The stacks `[B, k, H, W]` whose newest frames are `slots` of `rows`."""
        idx = (slots.unsqueeze(1) - self._back) % self.ring
        stacks = self.frames[rows.unsqueeze(1), idx]
        keep = self._back <= self.ep_pos[rows, slots].long().unsqueeze(1)
        return stacks * keep.to(torch.uint8)[:, :, None, None]

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> TransitionBatch:
        """Uniform sample with replacement from the sampleable transitions (rejection sampling
        over the written slots: nearly all of them are sampleable)."""
        if self.size == 0:
            raise RuntimeError("sample() from an empty replay buffer")
        filled = int(self.written.max().clamp(max=self.ring))
        picked: list[torch.Tensor] = []
        have = 0
        while have < batch_size:
            cand = torch.randint(0, self.num_envs * filled, (2 * batch_size + 16,),
                                 device=self.device, generator=generator)
            cand = cand[self.valid.view(-1, )[self._flat(cand, filled)]]
            picked.append(cand)
            have += len(cand)
        cand = torch.cat(picked)[:batch_size]
        rows, slots = cand // filled, cand % filled
        nxt = (slots + 1) % self.ring
        return TransitionBatch(self._stacks(rows, slots), self.actions[rows, slots],
                               self.rewards[rows, slots], self._stacks(rows, nxt),
                               self.terminated[rows, slots].float())

    def _flat(self, cand: torch.Tensor, filled: int) -> torch.Tensor:
        """Indices into the flattened `[num_envs * ring]` flags of candidates over
        `[num_envs * filled]`."""
        return (cand // filled) * self.ring + cand % filled

    # ---- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Written slots, flags and ring positions (for checkpoints that save the buffer)."""
        f = int(self.written.max().clamp(max=self.ring))
        return {"frames": self.frames[:, :f].cpu(), "actions": self.actions[:, :f].cpu(),
                "rewards": self.rewards[:, :f].cpu(), "terminated": self.terminated[:, :f].cpu(),
                "ep_pos": self.ep_pos[:, :f].cpu(), "valid": self.valid[:, :f].cpu(),
                "head": self.head.cpu(), "written": self.written.cpu(),
                "last_next": self.last_next.cpu(), "has_last": self.has_last.cpu(),
                "ring": self.ring, "size": self.size}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` into a buffer of the same ring length and env rows."""
        if int(state["ring"]) != self.ring or state["frames"].shape[0] != self.num_envs:
            raise UserError(f"saved frame replay has {state['frames'].shape[0]} rings of "
                             f"{state['ring']} slots, this one {self.num_envs} of {self.ring}: "
                             f"resume with the same algo.buffer_size and env.num_envs")
        f = state["frames"].shape[1]
        for name in ("frames", "actions", "rewards", "terminated", "ep_pos", "valid"):
            target = getattr(self, name)
            target[:, :f] = state[name].to(self.device, target.dtype)
        for name in ("head", "written", "last_next", "has_last"):
            target = getattr(self, name)
            target.copy_(state[name].to(self.device, target.dtype))
        self._size = self.valid.sum()


def _rows_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per row of `[N, ...]` uint8 tensors, whether all elements are equal (compared 8 bytes at
    a time when the row size allows: 8x fewer elements to reduce)."""
    n = a.shape[0]
    a, b = a.reshape(n, -1), b.reshape(n, -1)
    if a.shape[1] % 8 == 0 and all(x.stride(1) == 1 and x.stride(0) % 8 == 0
                                   and x.storage_offset() % 8 == 0 for x in (a, b)):
        a, b = a.view(torch.int64), b.view(torch.int64)
    return (a == b).all(1)
