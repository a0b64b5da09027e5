"""Property test of `RolloutBuffer.finish`: for random rollouts it equals `compute_gae` with the
next-state values built by hand, flattens time-major, and forgets the previous rollout."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltrain.buffers.rollout import RolloutBuffer, compute_gae


@st.composite
def rollouts(draw, T: int, N: int) -> dict[str, torch.Tensor | float]:
    """A random [T, N] rollout: obs [T, N, 2], rewards, values, episode ends, V(final obs)."""
    num = st.floats(-10, 10, allow_nan=False, width=32)

    def grid(elem, *shape):
        size = 1
        for d in shape:
            size *= d
        return torch.tensor(draw(st.lists(elem, min_size=size, max_size=size))).reshape(shape)

    terminated = grid(st.booleans(), T, N)
    return {"obs": grid(num, T, N, 2), "actions": grid(st.integers(0, 3), T, N),
            "log_probs": grid(num, T, N), "values": grid(num, T, N), "rewards": grid(num, T, N),
            "terminated": terminated,
            "truncated": grid(st.booleans(), T, N) & ~terminated,  # the adapter never sets both
            "final_values": grid(num, T, N), "last_value": grid(num, N),
            "gamma": draw(st.floats(0, 1)), "lam": draw(st.floats(0, 1))}


def fill(buf: RolloutBuffer, r: dict) -> None:
    """Add the rollout step by step, as the on-policy loop does (V(final obs) for truncations)."""
    for t in range(r["obs"].shape[0]):
        buf.add(r["obs"][t], r["actions"][t], r["log_probs"][t], r["values"][t], r["rewards"][t],
                r["terminated"][t], r["truncated"][t])
        rows = r["truncated"][t]
        buf.truncated_values[t, rows] = r["final_values"][t, rows]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), T=st.integers(1, 6), N=st.integers(1, 3))
def test_rollout_buffer_finish_equals_compute_gae_with_hand_built_next_values(data, T, N):
    first, second = data.draw(rollouts(T, N)), data.draw(rollouts(T, N))
    buf = RolloutBuffer(T, N, (2,), (), torch.long, torch.device("cpu"))
    fill(buf, first)
    buf.finish(first["last_value"], first["gamma"], first["lam"])
    fill(buf, second)  # the same buffer again: nothing of the first rollout may leak in
    r = second
    batch = buf.finish(r["last_value"], r["gamma"], r["lam"])

    next_values = torch.empty(T, N)
    for t in range(T):
        for n in range(N):
            if r["truncated"][t, n]:
                next_values[t, n] = r["final_values"][t, n]  # V(true last obs), not of the reset
            elif t + 1 < T:
                next_values[t, n] = r["values"][t + 1, n]
            else:
                next_values[t, n] = r["last_value"][n]
    adv, ret = compute_gae(r["rewards"], r["values"], next_values, r["terminated"],
                           r["terminated"] | r["truncated"], r["gamma"], r["lam"])
    assert torch.equal(batch.advantages, adv.reshape(-1))
    assert torch.equal(batch.returns, ret.reshape(-1))
    for name in ("obs", "actions", "log_probs", "values"):  # flattened time-major: t * N + n
        assert torch.equal(getattr(batch, name), r[name].reshape(T * N, *r[name].shape[2:])), name
