"""DQN: targets, exploration schedule, target-network updates, dueling head, checkpoints."""

from __future__ import annotations

import pytest
import torch

from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.dqn import DQN, greedy_next_value, linear_schedule
from rltrain.errors import UserError
from rltrain.nets.q import QNetwork, dueling_aggregate
from rltrain.nets.spec import NetSpec
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="discrete", action_dim=2, num_envs=2)


def make_dqn(**overrides) -> DQN:
    torch.manual_seed(0)
    cfg = DQNConfig(**{"hidden_sizes": [16], "batch_size": 8, "lr": 1e-2, **overrides})
    return DQN(cfg, SPEC)


def make_batch(size: int = 8, terminated: float = 0.0) -> TransitionBatch:
    g = torch.Generator().manual_seed(1)
    return TransitionBatch(
        obs=torch.randn(size, 3, generator=g),
        actions=torch.randint(0, 2, (size,), generator=g),
        rewards=torch.randn(size, generator=g),
        next_obs=torch.randn(size, 3, generator=g),
        terminated=torch.full((size,), terminated),
    )


def set_linear_q(net: QNetwork, weight: list[list[float]], bias: list[float]) -> None:
    """Make a hidden-layer-free QNetwork compute Q(s) = W s + b."""
    with torch.no_grad():
        net.head.weight.copy_(torch.tensor(weight))
        net.head.bias.copy_(torch.tensor(bias))


def params_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def test_dueling_aggregation_subtracts_mean_advantage():
    value = torch.tensor([[1.0], [-2.0]])
    advantage = torch.tensor([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]])
    q = dueling_aggregate(value, advantage)
    assert torch.allclose(q, torch.tensor([[-1.0, 0.0, 4.0], [-3.0, -3.0, 0.0]]))


def test_dueling_network_combines_value_and_advantage_streams():
    net = QNetwork(NetSpec((2,), ()), n_actions=2, dueling=True)
    with torch.no_grad():
        net.head.value.weight.copy_(torch.tensor([[1.0, 0.0]]))
        net.head.value.bias.fill_(0.5)
        net.head.advantage.weight.copy_(torch.tensor([[0.0, 2.0], [0.0, 0.0]]))
        net.head.advantage.bias.zero_()
    q = net(torch.tensor([[3.0, 1.0]]))  # V = 3.5, A = [2, 0], mean A = 1
    assert torch.allclose(q, torch.tensor([[4.5, 2.5]]))


def test_greedy_next_value_double_q_selects_with_online_evaluates_with_target():
    online = torch.tensor([[1.0, 2.0], [5.0, 0.0]])
    target = torch.tensor([[10.0, 3.0], [1.0, 7.0]])
    assert torch.equal(greedy_next_value(online, target, double_q=True), torch.tensor([3.0, 1.0]))
    assert torch.equal(greedy_next_value(online, target, double_q=False), torch.tensor([10.0, 7.0]))


def test_double_dqn_target_uses_online_argmax_and_target_value():
    algo = DQN(DQNConfig(hidden_sizes=[], gamma=0.5, double_q=True), SPEC)
    set_linear_q(algo.q_net, [[1.0, 0, 0], [2.0, 0, 0]], [0.0, 0.0])  # online prefers action 1
    set_linear_q(algo.q_target, [[4.0, 0, 0], [1.0, 0, 0]], [0.0, 0.0])  # target prefers 0
    batch = TransitionBatch(torch.zeros(1, 3), torch.zeros(1, dtype=torch.long),
                            torch.tensor([1.0]), torch.tensor([[1.0, 0, 0]]), torch.zeros(1))
    assert algo.td_targets(batch).item() == pytest.approx(1.0 + 0.5 * 1.0)  # Q_target(s', 1)
    algo.cfg.double_q = False
    assert algo.td_targets(batch).item() == pytest.approx(1.0 + 0.5 * 4.0)  # max Q_target(s', ·)


def test_td_target_masks_bootstrap_on_terminated_only():
    algo = DQN(DQNConfig(hidden_sizes=[], gamma=0.9, double_q=False), SPEC)
    set_linear_q(algo.q_target, [[0.0, 0, 0], [0.0, 0, 0]], [2.0, 3.0])  # max Q(s', ·) = 3
    batch = TransitionBatch(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long),
                            torch.tensor([1.0, 1.0]), torch.zeros(2, 3), torch.tensor([0.0, 1.0]))
    assert torch.allclose(algo.td_targets(batch), torch.tensor([1.0 + 0.9 * 3.0, 1.0]))


def test_epsilon_decays_linearly_then_stays_at_final():
    assert linear_schedule(0, 1.0, 0.1, 1000) == pytest.approx(1.0)
    assert linear_schedule(500, 1.0, 0.1, 1000) == pytest.approx(0.55)
    assert linear_schedule(1000, 1.0, 0.1, 1000) == pytest.approx(0.1)
    assert linear_schedule(5000, 1.0, 0.1, 1000) == pytest.approx(0.1)
    assert linear_schedule(0, 1.0, 0.1, 0) == pytest.approx(0.1)


def test_act_is_greedy_at_zero_epsilon_and_uniform_at_one():
    algo = make_dqn(exploration_initial_eps=1.0, exploration_final_eps=0.0, exploration_steps=100)
    obs = torch.randn(2000, 3)
    greedy = algo.q_net(obs).argmax(-1)
    assert torch.equal(algo.act(obs, global_step=100), greedy)
    frac_random = (algo.act(obs, global_step=0) != greedy).float().mean().item()
    assert frac_random == pytest.approx(0.5, abs=0.05)  # half of the uniform draws hit greedy


def test_hard_target_update_copies_exactly_at_interval_and_not_before():
    algo = make_dqn(tau=1.0, target_update_interval=100)
    initial = [p.clone() for p in algo.q_target.parameters()]
    algo.update(make_batch(), global_step=99)
    assert all(torch.equal(p, q) for p, q in zip(algo.q_target.parameters(), initial, strict=True))
    assert not params_equal(algo.q_target, algo.q_net)
    online = [p.clone() for p in algo.q_net.parameters()]
    algo.update(make_batch(), global_step=100)  # copied first, then the gradient step
    assert all(torch.equal(p, q) for p, q in zip(algo.q_target.parameters(), online, strict=True))
    assert not params_equal(algo.q_target, algo.q_net)
    algo.update(make_batch(), global_step=150)  # next copy is due at 200
    assert all(torch.equal(p, q) for p, q in zip(algo.q_target.parameters(), online, strict=True))
    assert algo.next_target_update == 200


def test_every_step_of_a_burst_regresses_toward_the_copy_that_fell_due():
    """A burst of gradient steps at one env step (train_freq / gradient_steps) uses the online
    network as of the due copy as its target from its first step on (SB3 copies while
    collecting), not the copy a burst older."""
    algo = make_dqn(tau=1.0, target_update_interval=10)
    algo.update(make_batch(), global_step=10)  # the first burst's copy
    for _ in range(3):
        algo.update(make_batch(), global_step=10)
    before_burst = [p.clone() for p in algo.q_net.parameters()]
    batch = make_batch()
    seen = []
    real = algo.target_of
    algo.target_of = lambda q, t, b: seen.append([p.clone() for p in algo.q_target.parameters()]) \
        or real(q, t, b)
    algo.update(batch, global_step=20)  # the next burst: its copy is due
    assert all(torch.equal(p, q) for p, q in zip(seen[0], before_burst, strict=True))


@pytest.mark.parametrize("tau", [1.0, 0.25])
def test_the_target_update_carries_buffers_as_well(tau):
    """A Q-network with statistics (a BatchNorm's running mean, say) hands them to its target
    at each update, hard or soft, as a single run's and a seed batch's `polyak_update` do."""
    algo = make_dqn(tau=tau, target_update_interval=10)
    for net in (algo.q_net, algo.q_target):
        net.register_buffer("stats", torch.zeros(3))
    algo.q_net.stats.fill_(2.0)
    algo.update(make_batch(), global_step=10)
    assert algo.q_target.stats.tolist() == [2.0, 2.0, 2.0]


def test_polyak_target_update_blends_every_step_when_tau_below_one():
    """The blend comes before the step's gradient step: it mixes in the online network as it
    was when the update began."""
    algo = make_dqn(tau=0.25)
    for step in (1, 2):
        before = [p.clone() for p in algo.q_target.parameters()]
        online = [p.clone() for p in algo.q_net.parameters()]
        algo.update(make_batch(), global_step=step)
        for t, old, net in zip(algo.q_target.parameters(), before, online, strict=True):
            assert torch.allclose(t, 0.75 * old + 0.25 * net)
        assert not params_equal(algo.q_target, algo.q_net)


def test_update_changes_online_parameters_and_reports_metrics():
    algo = make_dqn()
    before = [p.clone() for p in algo.q_net.parameters()]
    metrics = algo.update(make_batch(), global_step=0)
    assert all(not torch.equal(b, p) for b, p in zip(before, algo.q_net.parameters(), strict=True))
    assert set(metrics) == {"train/q_loss", "train/mean_q", "train/td_target_mean",
                            "train/grad_norm", "train/learning_rate", "exploration/epsilon"}
    assert metrics["exploration/epsilon"] == pytest.approx(1.0)
    assert metrics["train/q_loss"] > 0


def test_state_dict_round_trips_through_weights_only_load(tmp_path):
    algo = make_dqn(dueling=True, target_update_interval=10)
    for step in range(3):
        algo.update(make_batch(), global_step=step * 7)
    torch.save(algo.state_dict(), tmp_path / "dqn.pt")
    restored = make_dqn(dueling=True, target_update_interval=10)
    restored.load_state_dict(torch.load(tmp_path / "dqn.pt", weights_only=True))
    assert params_equal(restored.q_net, algo.q_net)
    assert params_equal(restored.q_target, algo.q_target)
    assert restored.next_target_update == algo.next_target_update == 20
    m1, m2 = algo.update(make_batch(), 21), restored.update(make_batch(), 21)
    assert m1 == m2  # identical optimizer state gives an identical next step


def test_invalid_exploration_eps_is_a_user_error():
    with pytest.raises(UserError, match="exploration_final_eps"):
        DQNConfig(exploration_final_eps=1.5).validate(None)


def test_learning_rate_decays_linearly_when_decay_steps_set():
    algo = make_dqn(lr=1e-2, lr_final=1e-3, lr_decay_steps=100)
    metrics = algo.update(make_batch(), global_step=50)
    assert metrics["train/learning_rate"] == pytest.approx(5.5e-3)
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(5.5e-3)
    assert algo.learning_rate(1000) == pytest.approx(1e-3)
    assert make_dqn(lr=1e-2).learning_rate(1000) == pytest.approx(1e-2)
