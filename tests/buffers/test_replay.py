"""Replay ring buffer: wrap-around order, sampling, next_obs at episode ends, state round trip."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltrain.buffers.replay import ReplayBuffer
from rltrain.config.schema import EnvConfig
from rltrain.envs.make import make_env
from rltrain.errors import UserError


def make_buffer(capacity: int) -> ReplayBuffer:
    return ReplayBuffer(capacity, (2,), (), torch.long)


def add_numbered(buf: ReplayBuffer, first: int, n: int) -> None:
    """Add n transitions numbered first..first+n-1: obs [i, -i], next_obs [i + 0.5, 0], reward i."""
    i = torch.arange(first, first + n, dtype=torch.float32)
    buf.add(torch.stack([i, -i], 1), i.long(), i, torch.stack([i + 0.5, 0 * i], 1), i > 1e9)


def test_replay_wraps_without_losing_order_with_several_envs():
    buf = make_buffer(5)
    for batch in range(4):  # 4 vector steps of 2 envs: transitions 0..7 into 5 slots
        add_numbered(buf, 2 * batch, 2)
    # Writes went to slots (0,1) (2,3) (4,0) (1,2): slot s holds the last transition written there.
    assert buf.size == 5 and buf.pos == 8 % 5 == 3
    assert buf.rewards.tolist() == [5.0, 6.0, 7.0, 3.0, 4.0]
    # Reading the ring from `pos` gives the 5 most recent transitions, oldest first.
    assert torch.roll(buf.rewards, -buf.pos).tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert torch.roll(buf.actions, -buf.pos).tolist() == [3, 4, 5, 6, 7]
    assert torch.roll(buf.obs[:, 1], -buf.pos).tolist() == [-3.0, -4.0, -5.0, -6.0, -7.0]
    assert torch.roll(buf.next_obs[:, 0], -buf.pos).tolist() == [3.5, 4.5, 5.5, 6.5, 7.5]


def test_replay_samples_only_filled_slots_and_keeps_rows_aligned():
    buf = make_buffer(10)
    add_numbered(buf, 1, 3)  # rewards 1, 2, 3 in slots 0..2; slots 3..9 are empty zeros
    batch = buf.sample(500, generator=torch.Generator().manual_seed(0))
    assert set(batch.rewards.tolist()) == {1.0, 2.0, 3.0}
    assert torch.equal(batch.obs[:, 0], batch.rewards)
    assert torch.equal(batch.obs[:, 1], -batch.rewards)
    assert torch.equal(batch.next_obs[:, 0], batch.rewards + 0.5)
    assert torch.equal(batch.actions, batch.rewards.long())
    assert batch.terminated.dtype == torch.float32 and batch.terminated.sum().item() == 0.0


def test_replay_sample_from_empty_buffer_raises():
    with pytest.raises(RuntimeError, match="empty"):
        make_buffer(4).sample(2)


def test_replay_rejects_non_positive_capacity():
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(0)


def test_replay_stores_true_final_obs_as_next_obs_and_bootstraps_truncations(counter_env_id):
    # CounterEnv: obs after step k is [k]; action 1 terminates; the time limit truncates at k=3.
    env = make_env(EnvConfig(id=counter_env_id, num_envs=2, max_episode_steps=3))
    buf = ReplayBuffer(16, (1,), (), torch.long)
    obs = env.reset(seed=0)
    for action in ([0, 0], [1, 0], [0, 0]):  # row 0 terminates at k=2, row 1 truncates at k=3
        res = env.step(torch.tensor(action))
        buf.add(obs, torch.tensor(action), res.reward, res.final_obs, res.terminated)
        obs = res.obs
    env.close()
    # slot = 2 * step + row
    assert buf.obs[:6, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 2.0]
    assert buf.next_obs[:6, 0].tolist() == [1.0, 1.0, 2.0, 2.0, 1.0, 3.0]  # never a reset obs
    assert buf.terminated[:6].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # truncation keeps 0


def test_replay_state_dict_round_trip_restores_contents_and_position():
    buf = make_buffer(5)
    for batch in range(4):
        add_numbered(buf, 2 * batch, 2)
    restored = make_buffer(5)
    restored.load_state_dict(buf.state_dict())
    assert (restored.pos, restored.size) == (buf.pos, buf.size)
    for name in ("obs", "next_obs", "actions", "rewards", "terminated"):
        assert torch.equal(getattr(restored, name), getattr(buf, name)), name
    add_numbered(buf, 8, 1)
    add_numbered(restored, 8, 1)
    assert torch.equal(restored.rewards, buf.rewards)  # the next write lands in the same slot


def test_replay_state_dict_of_partly_filled_buffer_round_trips():
    buf = make_buffer(8)
    add_numbered(buf, 0, 3)
    restored = make_buffer(8)
    restored.load_state_dict(buf.state_dict())
    assert (restored.pos, restored.size) == (3, 3)
    assert restored.rewards.tolist() == [0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_replay_load_refuses_more_transitions_than_capacity():
    buf = make_buffer(5)
    add_numbered(buf, 0, 5)
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(3).load_state_dict(buf.state_dict())


@settings(max_examples=40, deadline=None)
@given(capacity=st.integers(1, 9), data=st.data())
def test_replay_invariants_size_position_and_last_write_per_slot(capacity, data):
    batches = data.draw(st.lists(st.integers(1, capacity), max_size=12))
    buf = make_buffer(capacity)
    added = 0
    for n in batches:
        add_numbered(buf, added, n)
        added += n
        assert buf.size == min(added, capacity)
        assert buf.pos == added % capacity
    for slot in range(buf.size):
        # transition i went to slot i % capacity; the slot keeps the last one written
        last = max(i for i in range(added) if i % capacity == slot)
        assert buf.rewards[slot].item() == last
        assert buf.obs[slot].tolist() == [last, -last]


def test_replay_keeps_image_observations_whole():
    buf = ReplayBuffer(4, (6, 5, 3), (), torch.long)
    obs = torch.arange(2 * 90, dtype=torch.float32).reshape(2, 6, 5, 3)
    buf.add(obs, torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), obs + 1000, torch.tensor([False, True]))
    batch = buf.sample(16, generator=torch.Generator().manual_seed(0))
    assert batch.obs.shape == batch.next_obs.shape == (16, 6, 5, 3)
    for o, a, r, n in zip(batch.obs, batch.actions, batch.rewards, batch.next_obs, strict=True):
        assert torch.equal(o, obs[a]) and torch.equal(n, obs[a] + 1000) and r == a + 1


def test_replay_that_cannot_fit_in_memory_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr("rltrain.buffers.replay.available_memory", lambda device: 10 * 2**30)
    with pytest.raises(UserError, match=r"^replay buffer: 1,000,000 transitions of observations "
                                        r"\[40, 40, 3\] need 35.8 GiB on cpu, 10.0 GiB is "
                                        r"available: lower algo.buffer_size$"):
        ReplayBuffer(1_000_000, (40, 40, 3), (), torch.long)
    assert ReplayBuffer(1000, (40, 40, 3), (), torch.long).nbytes > 2 * 1000 * 4800 * 4
