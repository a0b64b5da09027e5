"""FrameReplayBuffer through its public interface (add / sample / state_dict / nbytes) against a
naive reference (a ReplayBuffer of full uint8 stacks), on a synthetic multi-env frame-stacking
stream written independently of `test_frame_replay.py`'s: frames name their env, episode and
step; episodes of 1 to 13 steps (shorter than k too) end terminated or truncated; life losses
are terminated without a reset; small rings wrap many times."""

from __future__ import annotations

import pytest
import torch

from rltrain.buffers.frame_replay import FrameReplayBuffer
from rltrain.buffers.replay import ReplayBuffer
from rltrain.errors import UserError

H, W = 3, 4


def _frame(env: int, episode: int, step: int) -> torch.Tensor:
    """A frame that names its env, episode and step (never all zero: the env pixel is >= 1)."""
    f = torch.zeros(H, W, dtype=torch.uint8)
    f[0, 0], f[0, 1] = env + 1, episode % 250 + 1
    f[0, 2], f[0, 3] = step % 250 + 1, step // 250 + 1
    return f


def _owner(frame: torch.Tensor) -> tuple[int, int]:
    return int(frame[0, 0]) - 1, int(frame[0, 1]) - 1


def stream(num_envs: int, k: int, steps: int, lengths: list[list[int]], life_loss_every: int = 0,
           start_full: bool = False):
    """Yield (obs, action, reward, next_obs, terminated, truncated) batches as a vec-level frame
    stack gives them: reset stacks are zeros but the newest frame, `next_obs` of an ended row
    is its episode's stack. Episode e of row i lasts `lengths[i][e % len]` steps and ends
    terminated (even e) or truncated (odd e); a `life_loss_every` step is terminated without a
    reset (the stack runs on). `action` is a unique transition id."""
    stacks = torch.zeros(num_envs, k, H, W, dtype=torch.uint8)
    episode, t = [0] * num_envs, [0] * num_envs
    for i in range(num_envs):
        stacks[i, -1] = _frame(i, 0, 0)
        if start_full:  # a stream that starts mid-episode: older frames already present
            for j in range(k - 1):
                stacks[i, j] = _frame(i, 0, 1000 + j)
    uid = 0
    for _ in range(steps):
        obs = stacks.clone()
        nxt = stacks.clone()
        term = torch.zeros(num_envs, dtype=torch.bool)
        trunc = torch.zeros(num_envs, dtype=torch.bool)
        new = stacks.clone()
        for i in range(num_envs):
            t[i] += 1
            nxt[i] = torch.cat([stacks[i, 1:], _frame(i, episode[i], t[i]).unsqueeze(0)])
            new[i] = nxt[i]
            length = lengths[i][episode[i] % len(lengths[i])]
            if t[i] >= length:
                (term if episode[i] % 2 == 0 else trunc)[i] = True
                episode[i] += 1
                t[i] = 0
                new[i] = 0
                new[i, -1] = _frame(i, episode[i], 0)
            elif life_loss_every and t[i] % life_loss_every == 0:
                term[i] = True
        actions = torch.arange(uid, uid + num_envs)
        uid += num_envs
        rewards = actions.float() * 0.5
        stacks = new
        yield obs, actions, rewards, nxt, term, trunc


def fill(buf: FrameReplayBuffer, num_envs: int, k: int, steps: int, lengths, **kw) -> ReplayBuffer:
    """Feed the stream to `buf` and to a reference that keeps every transition (index = uid)."""
    ref = ReplayBuffer(steps * num_envs, (k, H, W), (), torch.long, obs_dtype=torch.uint8)
    for obs, a, r, nxt, term, _ in stream(num_envs, k, steps, lengths, **kw):
        buf.add(obs, a, r, nxt, term)
        ref.add(obs, a, r, nxt, term)
    return ref


def assert_matches(batch, ref: ReplayBuffer) -> None:
    """Every transition of `batch` is exactly the reference transition its action names."""
    uid = batch.actions
    assert batch.obs.dtype == torch.uint8 and batch.next_obs.dtype == torch.uint8
    assert torch.equal(batch.obs, ref.obs[uid])
    assert torch.equal(batch.next_obs, ref.next_obs[uid])
    assert torch.equal(batch.rewards, ref.rewards[uid])
    assert torch.equal(batch.terminated, ref.terminated[uid])
    for stacks in (batch.obs, batch.next_obs):  # no frame of another episode in a stack
        for stack in stacks.unique(dim=0):
            owners = {_owner(f) for f in stack if f.any()}
            assert len(owners) == 1, owners


def make(capacity: int, num_envs: int, k: int) -> FrameReplayBuffer:
    return FrameReplayBuffer(capacity, num_envs, (k, H, W), (), torch.long)


def sampleable(buf: FrameReplayBuffer, ref: ReplayBuffer, draws: int = 40_000) -> set[int]:
    """The transitions `sample` returns (each checked exact) over many draws: with a few hundred
    sampleable, the odds of missing one are below e^-80."""
    g = torch.Generator().manual_seed(1)
    batch = buf.sample(draws, g)
    assert batch.obs.shape == (draws, *buf.obs_shape)
    assert_matches(batch, ref)
    return set(batch.actions.tolist())


LENGTHS = [[1, 5, 2, 9, 3], [7, 1, 1, 4], [2, 3, 11], [13]]


@pytest.mark.parametrize("k", [1, 2, 4])
def test_every_transition_matches_the_reference_without_wrap(k):
    n, steps = 4, 60
    buf = make(n * (2 * steps + k), n, k)  # room for every final frame: no wrap
    ref = fill(buf, n, k, steps, LENGTHS)
    assert sampleable(buf, ref) == set(range(n * steps))


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("capacity", [24, 41, 80])
def test_wrap_around_keeps_a_suffix_of_exact_transitions(k, capacity):
    n, steps = 4, 90
    buf = make(capacity, n, k)
    ref = fill(buf, n, k, steps, LENGTHS, life_loss_every=4)
    ids = sampleable(buf, ref)
    ring = buf.capacity // n
    for i in range(n):  # per row: a contiguous run ending at the newest transition
        mine = sorted(u // n for u in ids if u % n == i)
        assert mine and mine[-1] == steps - 1
        assert mine == list(range(mine[0], steps))
        # not sampleable: the pending slot, a final frame per ended episode, and stacks that
        # reach back past the oldest slot (at most 2(k-1) slots when invalidated conservatively)
        ends = sum(1 for s in range(mine[0], steps) if ref.obs[s * n + i, :-1].sum() == 0)
        assert len(mine) >= ring - 1 - (ends + 1) - 2 * (k - 1)


def test_small_batches_never_mix_episodes_or_return_incomplete_transitions():
    n, k, steps = 4, 4, 70
    buf = make(30, n, k)
    ref = fill(buf, n, k, steps, LENGTHS)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        batch = buf.sample(32, g)
        assert batch.obs.shape == (32, k, H, W)
        assert_matches(batch, ref)


def test_stream_starting_mid_episode():
    n, k, steps = 2, 4, 40
    buf = make(200, n, k)
    ref = fill(buf, n, k, steps, [[6, 2], [3]], start_full=True)
    assert sampleable(buf, ref) == set(range(n * steps))


def test_sample_before_any_transition_refuses():
    buf = make(10, 2, 4)
    with pytest.raises(RuntimeError):
        buf.sample(4)


def test_state_dict_round_trip_and_continue():
    n, k, steps = 4, 4, 80
    gen = list(stream(n, k, steps, LENGTHS))
    ref = ReplayBuffer(steps * n, (k, H, W), (), torch.long, obs_dtype=torch.uint8)
    for obs, a, r, nxt, term, _ in gen:
        ref.add(obs, a, r, nxt, term)
    buf = make(120, n, k)
    for obs, a, r, nxt, term, _ in gen[:50]:
        buf.add(obs, a, r, nxt, term)
    state = buf.state_dict()
    assert all(isinstance(v, (torch.Tensor, int)) for v in state.values())
    same = make(120, n, k)
    same.load_state_dict(state)
    assert same.size == buf.size
    assert sampleable(same, ref) == sampleable(buf, ref)
    for b in (buf, same):
        for obs, a, r, nxt, term, _ in gen[50:]:
            b.add(obs, a, r, nxt, term)
    assert same.size == buf.size
    assert sampleable(same, ref) == sampleable(buf, ref)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(buf.sample(64, g1).obs, same.sample(64, g2).obs)


def test_bytes_per_transition_near_one_frame():
    n, k, capacity = 8, 4, 4000
    buf = FrameReplayBuffer(capacity, n, (k, 84, 84), (), torch.long)
    assert capacity <= buf.capacity < capacity + n * (k + 2)
    assert buf.nbytes / buf.capacity < 1.1 * 84 * 84 + 64


def test_atari_million_transitions_fit_in_8_gb():
    """torch.empty leaves the frames' pages untouched: the real allocation can be measured."""
    n, k, capacity = 8, 4, 1_000_000
    try:
        buf = FrameReplayBuffer(capacity, n, (k, 84, 84), (), torch.long)
    except UserError as exc:  # a machine with less free memory refuses with one line
        pytest.skip(str(exc))
    assert buf.nbytes <= 8 * 10**9
    assert buf.nbytes < 2 * capacity * k * 84 * 84 / 7  # vs uint8 obs + next_obs stacks


def test_make_replay_picks_the_buffer_and_obs_dtype():
    from rltrain.algos.configs.dqn import DQNConfig
    from rltrain.runner.off_policy import make_replay
    from rltrain.types import EnvSpec

    cfg = DQNConfig(buffer_size=64)  # algo.replay=auto
    atari = EnvSpec((4, 84, 84), "discrete", 6, 2, pixels=True, frame_stack=4)
    assert isinstance(make_replay(atari, cfg, torch.device("cpu"), torch.uint8), FrameReplayBuffer)
    pixels = EnvSpec((40, 40, 3), "discrete", 2, 2, pixels=True)
    plain = make_replay(pixels, cfg, torch.device("cpu"), torch.uint8)
    assert isinstance(plain, ReplayBuffer) and plain.obs.dtype == torch.uint8
    vector = EnvSpec((4,), "box", 1, 2)
    assert make_replay(vector, cfg, torch.device("cpu"), torch.float32).obs.dtype == torch.float32
    # named: the uniform ring for stacked frames too; the frame replay refuses other obs
    uniform = DQNConfig(buffer_size=64, replay="uniform")
    assert type(make_replay(atari, uniform, torch.device("cpu"), torch.uint8)) is ReplayBuffer
    with pytest.raises(UserError, match=r"algo.replay=frames stores frame-stacked pixel"):
        make_replay(vector, DQNConfig(buffer_size=64, replay="frames"), torch.device("cpu"))


def test_a_replay_name_that_is_not_one_is_a_one_line_error():
    from rltrain.algos.configs.dqn import DQNConfig

    with pytest.raises(UserError, match=r"algo.replay='per' is not a replay: choose auto, "
                                        r"uniform, frames, her"):
        DQNConfig(replay="per").validate(None)
