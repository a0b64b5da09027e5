"""FrameReplayBuffer against a naive reference (a plain ReplayBuffer of full stacks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rltrain.buffers.replay as replay_module
from rltrain.buffers.frame_replay import FrameReplayBuffer
from rltrain.buffers.replay import ReplayBuffer
from rltrain.errors import UserError

K, H, W = 4, 2, 3
FINAL = 255  # pixel [1, 2] of an episode's final frame


class StackStream:
    """N rows of a frame-stacking env as `envs/atari_vec.FrameStack` produces them (zeros but
    the newest frame after a reset; `final_obs` the ended episode's stack), frames unique:
    [row+1, episode+1, step+1 / life-loss count / ..., FINAL on the last frame]."""

    def __init__(self, n: int, seed: int, max_len: int = 12):
        self.n, self.rng, self.max_len = n, np.random.default_rng(seed), max_len
        self.episode = [0] * n
        self.step_i = [0] * n
        self.length = [self._length() for _ in range(n)]
        self.stack = torch.zeros((n, K, H, W), dtype=torch.uint8)
        for i in range(n):
            self.stack[i, -1] = self._frame(i, final=False)

    def _length(self) -> int:
        return int(self.rng.integers(1, self.max_len + 1))

    def _frame(self, i: int, final: bool) -> torch.Tensor:
        ep, t = self.episode[i], self.step_i[i]
        f = torch.tensor([[i + 1, ep % 250 + 1, t % 250 + 1],
                          [(ep // 250) % 250 + 1, t // 250 % 250 + 1, FINAL if final else 1]],
                         dtype=torch.uint8)
        return f

    def step(self):
        """(obs, reward, final_obs, terminated, ended) of one step of every row."""
        obs = self.stack.clone()
        final = torch.empty_like(obs)
        nxt = torch.empty_like(obs)
        terminated = torch.zeros(self.n, dtype=torch.bool)
        ended = torch.zeros(self.n, dtype=torch.bool)
        for i in range(self.n):
            self.step_i[i] += 1
            end = self.step_i[i] >= self.length[i]
            final[i] = torch.cat([obs[i, 1:], self._frame(i, final=end)[None]])
            if end:
                ended[i] = True
                terminated[i] = bool(self.rng.random() < 0.5)  # else truncated
                self.episode[i] += 1
                self.step_i[i] = 0
                self.length[i] = self._length()
                nxt[i] = 0
                nxt[i, -1] = self._frame(i, final=False)
            else:
                terminated[i] = bool(self.rng.random() < 0.1)  # a life loss: the game goes on
                nxt[i] = final[i]
        self.stack = nxt
        reward = torch.as_tensor(self.rng.standard_normal(self.n), dtype=torch.float32)
        return obs, reward, final, terminated, ended


def fill(n: int, steps: int, capacity: int, seed: int = 0):
    """A frame replay and its reference, fed the same stream; actions are transition ids."""
    stream = StackStream(n, seed)
    frame = FrameReplayBuffer(capacity, n, (K, H, W), (), torch.long)
    ref = ReplayBuffer(n * steps, (K, H, W), (), torch.long, obs_dtype=torch.uint8)
    for s in range(steps):
        obs, reward, final, term, _ = stream.step()
        ids = torch.arange(s * n, (s + 1) * n)
        frame.add(obs, ids, reward, final, term)
        ref.add(obs, ids, reward, final, term)
    return frame, ref, stream


def valid_slots(buf: FrameReplayBuffer) -> tuple[torch.Tensor, torch.Tensor]:
    rows, slots = buf.valid.nonzero(as_tuple=True)
    return rows, slots


def check_exact(buf: FrameReplayBuffer, ref: ReplayBuffer) -> int:
    """Every sampleable slot rebuilds exactly its reference transition; returns their count."""
    rows, slots = valid_slots(buf)
    ids = buf.actions[rows, slots]
    obs, nxt = buf._stacks(rows, slots), buf._stacks(rows, (slots + 1) % buf.ring)
    assert torch.equal(obs, ref.obs[ids])
    assert torch.equal(nxt, ref.next_obs[ids])
    assert torch.equal(buf.rewards[rows, slots], ref.rewards[ids])
    assert torch.equal(buf.terminated[rows, slots].float(), ref.terminated[ids])
    assert buf.size == len(ids) == len(set(ids.tolist()))
    return len(ids)


def one_episode(stacks: torch.Tensor) -> None:
    """No stack mixes frames of two episodes (zero frames excepted), nor of two rows."""
    for s in stacks:
        kept = s.flatten(1)[(s.flatten(1) != 0).any(1)]
        assert len({(int(f[0]), int(f[1]), int(f[3])) for f in kept}) == 1


@pytest.mark.parametrize("n,steps,capacity", [(1, 60, 1000), (3, 80, 1000), (3, 200, 60),
                                              (2, 300, 20), (4, 150, 17)])
def test_every_sampleable_slot_is_exactly_the_reference_transition(n, steps, capacity):
    buf, ref, _ = fill(n, steps, capacity, seed=n * 1000 + capacity)
    count = check_exact(buf, ref)
    if buf.ring >= steps * 2:  # no wrap-around: every transition is there
        assert count == n * steps
    else:  # wrapped: the newest transitions are there (all but finals / history at the seam)
        assert count >= n * (buf.ring // 2 - K)
    batch = buf.sample(512, torch.Generator().manual_seed(0))
    ids = batch.actions
    assert torch.equal(batch.obs, ref.obs[ids]) and torch.equal(batch.next_obs, ref.next_obs[ids])
    assert torch.equal(batch.rewards, ref.rewards[ids])
    assert torch.equal(batch.terminated, ref.terminated[ids])
    assert batch.obs.dtype == torch.uint8 and batch.obs.shape == (512, K, H, W)
    one_episode(batch.obs)
    one_episode(batch.next_obs)
    # the transition starts sampled are never an episode's final frame
    assert not (batch.obs[:, -1, 1, 2] == FINAL).any()


def test_final_frame_and_overwritten_history_slots_are_never_sampleable():
    buf, ref, _ = fill(2, 400, 24, seed=5)
    rows, slots = valid_slots(buf)
    assert not (buf.frames[rows, slots, 1, 2] == FINAL).any()  # final frames
    newest = buf.head
    assert not buf.valid[torch.arange(2), newest].any()  # the newest, incomplete slots
    # the k-1 oldest slots of each row reach back into overwritten frames
    nxt = buf.written % buf.ring
    for j in range(K - 1):
        assert not buf.valid[torch.arange(2), (nxt + j) % buf.ring].any()
    check_exact(buf, ref)
    # uniform over sampleable slots: each is drawn, none other
    batch = buf.sample(20000, torch.Generator().manual_seed(1))
    assert set(batch.actions.tolist()) == set(buf.actions[rows, slots].tolist())


def test_a_resumed_mid_episode_stack_is_stored_whole():
    buf = FrameReplayBuffer(100, 1, (K, H, W), (), torch.long)
    obs = torch.arange(1, K * H * W + 1, dtype=torch.uint8).reshape(1, K, H, W)
    nxt = torch.cat([obs[:, 1:], torch.full((1, 1, H, W), 99, dtype=torch.uint8)], 1)
    buf.add(obs, torch.tensor([7]), torch.tensor([1.0]), nxt, torch.tensor([False]))
    batch = buf.sample(4)
    assert torch.equal(batch.obs, obs.expand(4, -1, -1, -1))
    assert torch.equal(batch.next_obs, nxt.expand(4, -1, -1, -1))
    # a next_obs that is not obs shifted by a frame cannot be rebuilt: not stored
    buf.add(nxt, torch.tensor([8]), torch.tensor([1.0]), obs, torch.tensor([False]))
    assert buf.size == 1


def test_state_dict_round_trip():
    buf, ref, stream = fill(3, 90, 50, seed=3)
    other = FrameReplayBuffer(50, 3, (K, H, W), (), torch.long)
    other.load_state_dict(buf.state_dict())
    assert other.size == buf.size
    a, b = (x.sample(64, torch.Generator().manual_seed(2)) for x in (buf, other))
    assert all(torch.equal(x, y) if x is not None else y is None  # no masks: both None
               for x, y in zip(a, b, strict=True))
    for s in range(90, 120):  # both go on identically
        obs, reward, final, term, _ = stream.step()
        ids = torch.arange(s * 3, (s + 1) * 3)
        for x in (buf, other):
            x.add(obs, ids, reward, final, term)
    assert buf.size == other.size
    for name in ("frames", "actions", "rewards", "terminated", "ep_pos", "valid", "head"):
        got, want = getattr(other, name), getattr(buf, name)
        if name == "frames":  # only written slots are meaningful
            got, want = got[buf.valid], want[buf.valid]
        assert torch.equal(got, want), name
    with pytest.raises(UserError, match="same algo.buffer_size"):
        FrameReplayBuffer(500, 3, (K, H, W), (), torch.long).load_state_dict(buf.state_dict())


def test_bytes_per_transition():
    small = FrameReplayBuffer(1000, 1, (4, 84, 84), (), torch.long)
    assert small.nbytes / small.capacity < 1.05 * 84 * 84 + 64
    stacked_uint8 = ReplayBuffer(1000, (4, 84, 84), (), torch.long, obs_dtype=torch.uint8)
    assert stacked_uint8.nbytes > 7 * small.nbytes


def test_a_million_atari_transitions_fit_in_8_gb(monkeypatch):
    monkeypatch.setattr(replay_module, "available_memory", lambda device: None)
    big = FrameReplayBuffer(1_000_000, 1, (4, 84, 84), (), torch.long)  # empty: no page touched
    assert big.capacity == 1_000_000
    assert big.nbytes <= 8e9  # 7,071,028,242 bytes
    del big


def test_check_memory_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(replay_module, "available_memory", lambda device: 2**30)
    with pytest.raises(replay_module.UserError, match=(
            r"^replay buffer: 1,000,000 transitions of frames \(stored once; stacks are rebuilt "
            r"when sampled\) \[84, 84\] need .* lower algo.buffer_size$")):  # not "observations
        FrameReplayBuffer(1_000_000, 1, (4, 84, 84), (), torch.long)  # [84, 84]" for [4, 84, 84]


def test_plain_replay_stores_uint8_and_check_memory_counts_its_element_size(monkeypatch):
    buf = ReplayBuffer(100, (4, 84, 84), (), torch.long, obs_dtype=torch.uint8)
    assert buf.obs.dtype == buf.next_obs.dtype == torch.uint8
    assert buf.nbytes == 2 * 100 * 4 * 84 * 84 + 100 * (8 + 4 + 4)
    need_uint8 = 2 * 10_000 * 4 * 84 * 84  # 564 MB: fits in 1 GiB as uint8, not as float32
    monkeypatch.setattr(replay_module, "available_memory", lambda device: 2**30)
    ReplayBuffer(10_000, (4, 84, 84), (), torch.long, obs_dtype=torch.uint8)
    assert need_uint8 < 2**30 < 4 * need_uint8
    with pytest.raises(replay_module.UserError, match="lower algo.buffer_size"):
        ReplayBuffer(10_000, (4, 84, 84), (), torch.long)
