"""GAE and the rollout buffer: hand-computed cases across episode boundaries, and a reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltrain.buffers.rollout import RolloutBuffer, compute_gae

GAMMA, LAMBDA = 0.5, 0.5  # γλ = 0.25: every number below is an exact binary fraction

# A T=3, N=2 rollout. Row 0 terminates at t=1; row 1 is truncated (time limit) at t=0.
REWARDS = [[1.0, 2.0], [3.0, 1.0], [2.0, 4.0]]
VALUES = [[4.0, 2.0], [2.0, 6.0], [8.0, 2.0]]
TERMINATED = [[False, False], [True, False], [False, False]]
TRUNCATED = [[False, True], [False, False], [False, False]]
LAST_VALUE = [4.0, 6.0]  # V(obs after the last step)
V_FINAL_TRUNCATED = 10.0  # V(true last observation of row 1's truncated episode at t=0)

# Row 0:  δ2 = 2 + 0.5·4 − 8 = −4
#         δ1 = 3 + 0 (terminated: no bootstrap) − 2 = 1
#         δ0 = 1 + 0.5·V(s1)=0.5·2 − 4 = −2
#         A2 = −4;  A1 = 1 + 0 (done stops the recursion, A2 is not added) = 1
#         A0 = −2 + 0.25·1 = −1.75
#         R = A + V = [2.25, 3, 4]
# Row 1:  δ2 = 4 + 0.5·6 − 2 = 5
#         δ1 = 1 + 0.5·2 − 6 = −4
#         δ0 = 2 + 0.5·10 (truncated: bootstrap from V(final obs), not V(reset obs)=6) − 2 = 5
#         A2 = 5;  A1 = −4 + 0.25·5 = −2.75;  A0 = 5 + 0 (done) = 5
#         R = A + V = [7, 3.25, 7]
EXPECTED_ADV = [[-1.75, 5.0], [1.0, -2.75], [-4.0, 5.0]]
EXPECTED_RET = [[2.25, 7.0], [3.0, 3.25], [4.0, 7.0]]


def t(x, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(x, dtype=dtype)


def test_gae_matches_hand_computed_values_across_termination_and_truncation():
    next_values = t([[2.0, V_FINAL_TRUNCATED], [8.0, 2.0], LAST_VALUE])
    terminated = t(TERMINATED, torch.bool)
    done = terminated | t(TRUNCATED, torch.bool)
    adv, ret = compute_gae(t(REWARDS), t(VALUES), next_values, terminated, done, GAMMA, LAMBDA)
    assert adv.tolist() == EXPECTED_ADV
    assert ret.tolist() == EXPECTED_RET


def test_gae_without_boundaries_is_the_discounted_sum_of_td_errors():
    # One row, no ends, γ = 1, λ = 1: A_t = Σ_{k≥t} δ_k = (Σ r) + V(last) − V(s_t).
    rewards, values = t([[1.0], [2.0], [3.0]]), t([[0.5], [1.0], [1.5]])
    next_values = t([[1.0], [1.5], [4.0]])
    no = torch.zeros(3, 1, dtype=torch.bool)
    adv, ret = compute_gae(rewards, values, next_values, no, no, 1.0, 1.0)
    assert adv.flatten().tolist() == [6 + 4 - 0.5, 5 + 4 - 1.0, 3 + 4 - 1.5]
    assert ret.flatten().tolist() == [10.0, 9.0, 7.0]


def fill_buffer(buf: RolloutBuffer) -> None:
    """Add the module's rollout step by step; obs[t, n] = [10 t + n]."""
    for step in range(3):
        obs = t([[10.0 * step], [10.0 * step + 1]])
        buf.add(obs, torch.tensor([step, step]), t([-0.1, -0.2]), t(VALUES[step]),
                t(REWARDS[step]), t(TERMINATED[step], torch.bool), t(TRUNCATED[step], torch.bool))


def test_rollout_buffer_bootstraps_truncated_rows_from_truncated_values():
    buf = RolloutBuffer(3, 2, (1,), (), torch.long, torch.device("cpu"))
    fill_buffer(buf)
    buf.truncated_values[0, 1] = V_FINAL_TRUNCATED  # what the loop stores for row 1 at t=0
    assert buf.full
    batch = buf.finish(t(LAST_VALUE), GAMMA, LAMBDA)
    # Flattened [T*N]: index t*N + n.
    assert batch.advantages.tolist() == [a for row in EXPECTED_ADV for a in row]
    assert batch.returns.tolist() == [r for row in EXPECTED_RET for r in row]
    assert batch.obs.flatten().tolist() == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
    assert batch.actions.tolist() == [0, 0, 1, 1, 2, 2]
    assert batch.values.tolist() == [v for row in VALUES for v in row]
    assert batch.log_probs.tolist() == pytest.approx([-0.1, -0.2] * 3)
    assert buf.step == 0  # ready for the next rollout


def test_rollout_buffer_without_truncated_value_would_bootstrap_from_the_reset_obs():
    # Guard for the test above: leaving truncated_values at 0 changes row 1's t=0 advantage,
    # so the expected numbers really depend on V(final obs).
    buf = RolloutBuffer(3, 2, (1,), (), torch.long, torch.device("cpu"))
    fill_buffer(buf)
    batch = buf.finish(t(LAST_VALUE), GAMMA, LAMBDA)
    assert batch.advantages[1].item() == 2.0 + 0.5 * 0.0 - 2.0  # not 5.0


def test_rollout_buffer_clears_stale_truncated_values_between_rollouts():
    buf = RolloutBuffer(3, 2, (1,), (), torch.long, torch.device("cpu"))
    fill_buffer(buf)
    buf.truncated_values[0, 1] = V_FINAL_TRUNCATED
    buf.finish(t(LAST_VALUE), GAMMA, LAMBDA)
    fill_buffer(buf)
    assert buf.truncated_values.abs().sum().item() == 0.0


def test_rollout_buffer_refuses_to_finish_a_partial_rollout():
    buf = RolloutBuffer(3, 2, (1,), (), torch.long, torch.device("cpu"))
    buf.add(t([[0.0], [1.0]]), torch.tensor([0, 0]), t([0.0, 0.0]), t([0.0, 0.0]),
            t([0.0, 0.0]), torch.tensor([False, False]), torch.tensor([False, False]))
    assert not buf.full
    with pytest.raises(AssertionError):
        buf.finish(t([0.0, 0.0]), GAMMA, LAMBDA)


def reference_gae(rewards, values, next_values, terminated, done, gamma, lam):
    """Straight python loops over rows and time: the definition, with no vectorization."""
    T, N = len(rewards), len(rewards[0])
    adv = [[0.0] * N for _ in range(T)]
    for n in range(N):
        running = 0.0
        for step in reversed(range(T)):
            bootstrap = 0.0 if terminated[step][n] else gamma * next_values[step][n]
            delta = rewards[step][n] + bootstrap - values[step][n]
            running = delta + (0.0 if done[step][n] else gamma * lam * running)
            adv[step][n] = running
    return adv


@st.composite
def rollouts(draw):
    T = draw(st.integers(1, 8))
    N = draw(st.integers(1, 4))
    num = st.floats(-10, 10, allow_nan=False, width=32)
    grid = lambda elem: st.lists(st.lists(elem, min_size=N, max_size=N), min_size=T, max_size=T)  # noqa: E731
    terminated = draw(grid(st.booleans()))
    truncated = draw(grid(st.booleans()))
    done = [[a or b for a, b in zip(r1, r2, strict=True)]
            for r1, r2 in zip(terminated, truncated, strict=True)]
    return (draw(grid(num)), draw(grid(num)), draw(grid(num)), terminated, done,
            draw(st.floats(0, 1)), draw(st.floats(0, 1)))


@settings(max_examples=40, deadline=None)
@given(rollouts())
def test_compute_gae_equals_python_loop_reference(case):
    rewards, values, next_values, terminated, done, gamma, lam = case
    f64 = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    adv, ret = compute_gae(f64(rewards), f64(values), f64(next_values),
                           torch.tensor(terminated), torch.tensor(done), gamma, lam)
    expected = reference_gae(rewards, values, next_values, terminated, done, gamma, lam)
    # compute_gae multiplies γ and γλ into float32 masks, so they are rounded to float32 there
    torch.testing.assert_close(adv, f64(expected), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret, f64(expected) + f64(values), rtol=1e-5, atol=1e-5)


def test_rollout_flattens_image_observations_keeping_their_shape():
    buf = RolloutBuffer(3, 2, (6, 5, 3), (), torch.long, torch.device("cpu"))
    for t in range(3):
        obs = torch.full((2, 6, 5, 3), float(t)) + torch.tensor([0.0, 10.0]).view(2, 1, 1, 1)
        buf.add(obs, torch.zeros(2, dtype=torch.long), torch.zeros(2), torch.zeros(2),
                torch.ones(2), torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool))
    batch = buf.finish(torch.zeros(2), gamma=0.9, gae_lambda=1.0)
    assert batch.obs.shape == (6, 6, 5, 3)
    assert [float(o[0, 0, 0]) for o in batch.obs] == [0.0, 10.0, 1.0, 11.0, 2.0, 12.0]  # [t, env]
