"""TQC: the truncated target, the quantile Huber loss, the actor's critic value, an update, a
seed batch, and a learning check."""

import pytest
import torch

from rltrain.algos.configs.tqc import TQCConfig
from rltrain.algos.off_policy_steps import quantile_huber_loss
from rltrain.algos.tqc import TQC, mean_quantiles, tqc_losses, tqc_target
from rltrain.errors import UserError
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=1)
QUIET = ["logger=none", "progress=off", "checkpoint.freq=0", "eval.freq=0"]


def make_tqc(**overrides) -> TQC:
    torch.manual_seed(0)
    return TQC(TQCConfig(hidden_sizes=[16, 16], **overrides), SPEC)


def make_batch(n: int = 32, seed: int = 1) -> TransitionBatch:
    g = torch.Generator().manual_seed(seed)
    terminated = (torch.arange(n) % 2).float()
    return TransitionBatch(torch.randn(n, 3, generator=g), torch.rand(n, 2, generator=g) * 2 - 1,
                           torch.randn(n, generator=g), torch.randn(n, 3, generator=g), terminated)


def test_the_target_pools_sorts_and_drops_the_largest_quantiles_of_all_critics():
    """Two critics of three quantiles, one dropped per critic: of the pooled six values the two
    largest go (whichever critic holds them), the four others are kept in ascending order, and
    each kept one is r + γ (1 − terminated) (z − α log π)."""
    z = torch.tensor([[[5.0, 1.0, 3.0]], [[0.0, 6.0, 2.0]]])  # [E=2, B=1, M=3]
    batch = TransitionBatch(torch.zeros(1, 3), torch.zeros(1, 2), torch.tensor([1.0]),
                            torch.zeros(1, 3), torch.tensor([0.0]))
    y = tqc_target(lambda obs, action: z, batch, torch.zeros(1, 2), torch.tensor([-2.0]),
                   torch.tensor(0.5), 0.9, drop=2)
    kept = torch.tensor([0.0, 1.0, 2.0, 3.0])  # 5 and 6 dropped
    torch.testing.assert_close(y, 1.0 + 0.9 * (kept + 0.5 * 2.0).unsqueeze(0))
    terminal = TransitionBatch(*batch[:4], torch.tensor([1.0]))
    y = tqc_target(lambda obs, action: z, terminal, torch.zeros(1, 2), torch.tensor([-2.0]),
                   torch.tensor(0.5), 0.9, drop=0)
    assert torch.equal(y, torch.ones(1, 6))  # no bootstrap, nothing dropped: K = E·M


def test_the_algorithms_target_drops_top_quantiles_per_net_times_critics():
    algo, batch = make_tqc(n_critics=3, n_quantiles=5, top_quantiles_to_drop_per_net=2,
                           gamma=0.9), make_batch()
    torch.manual_seed(3)
    y = algo.target(batch)
    assert y.shape == (32, 3 * 5 - 2 * 3)
    torch.manual_seed(3)  # the same a' ~ π(s')
    with torch.no_grad():
        next_action, next_log_prob = algo.actor(batch.next_obs)
        pooled = algo.critic_target(batch.next_obs, next_action).permute(1, 0, 2).reshape(32, 15)
    kept = pooled.sort(-1).values[:, :9] - algo.alpha * next_log_prob.unsqueeze(-1)
    expected = batch.rewards.unsqueeze(-1) + 0.9 * (1 - batch.terminated).unsqueeze(-1) * kept
    torch.testing.assert_close(y, expected)


def test_quantile_huber_loss_on_hand_computed_cases():
    """M = 2 quantiles (τ̂ = ¼, ¾) at 0 against K = 2 targets 0.5 and −2: pairs u = 0.5 (Huber
    0.125, weights ¼ and ¾) and u = −2 (Huber 1.5, weights |¼ − 1| = ¾ and |¾ − 1| = ¼)."""
    current, target = torch.zeros(1, 2), torch.tensor([[0.5, -2.0]])
    pairs = torch.tensor([[0.25 * 0.125, 0.75 * 1.5],   # quantile ¼: targets 0.5, −2
                          [0.75 * 0.125, 0.25 * 1.5]])  # quantile ¾
    loss = quantile_huber_loss(current, target, sum_over_quantiles=False)
    torch.testing.assert_close(loss, pairs.mean().reshape(1))
    loss = quantile_huber_loss(current, target, sum_over_quantiles=True)
    torch.testing.assert_close(loss, pairs.sum(0).mean().reshape(1))
    one = quantile_huber_loss(torch.zeros(1, 1), torch.tensor([[3.0]]), sum_over_quantiles=True)
    assert one.item() == pytest.approx(0.5 * 2.5)  # τ̂ = ½, past |u| = 1 the loss is linear


def test_quantile_huber_loss_matches_sb3_contribs_reduction():
    """SB3-contrib's TQC reduction: one mean over rows, critics, quantiles and targets, of
    |τ̂ − 1{u < 0}| Huber(u) with u = target − current; here each critic's, then their mean."""
    g = torch.Generator().manual_seed(0)
    z, y = torch.randn(3, 8, 5, generator=g), torch.randn(8, 7, generator=g)  # [E, B, M], [B, K]
    losses = tqc_losses(z, y)
    assert losses.shape == (3,)
    current, target = z.permute(1, 0, 2), y[:, None, :]  # SB3's [B, E, M] and [B, 1, K]
    tau = ((torch.arange(5) + 0.5) / 5).view(1, 1, -1, 1)
    u = target.unsqueeze(-2) - current.unsqueeze(-1)
    huber = torch.where(u.abs() > 1, u.abs() - 0.5, u**2 * 0.5)
    sb3 = ((tau - (u < 0).float()).abs() * huber).mean()
    torch.testing.assert_close(losses.mean(), sb3)


def test_the_actor_maximizes_the_mean_of_every_critics_quantiles():
    z = torch.arange(12.0).reshape(2, 2, 3)  # [E=2, B=2, M=3]
    value = mean_quantiles(lambda obs, action: z, None, None)
    assert value.shape == (1, 2)
    torch.testing.assert_close(value, z.permute(1, 0, 2).reshape(2, 6).mean(-1).unsqueeze(0))


def test_update_trains_the_quantile_critics_and_logs_each_critics_loss():
    algo, batch = make_tqc(n_critics=3), make_batch()
    assert algo.critic(batch.obs, batch.actions).shape == (3, 32, 25)
    before = {k: v.clone() for k, v in algo.critic.state_dict().items()}
    target_before = {k: v.clone() for k, v in algo.critic_target.state_dict().items()}
    metrics = algo.update(batch, 0)
    assert {f"train/critic{i}_loss" for i in (1, 2, 3)} <= set(metrics)
    assert {"train/q_loss", "train/mean_q", "train/actor_loss", "train/alpha"} <= set(metrics)
    assert all(not torch.equal(before[k], v) for k, v in algo.critic.state_dict().items())
    moved = {k: (v - target_before[k]).abs().max() for k, v in algo.critic_target.state_dict().items()}
    assert all(0 < m < 0.01 for m in moved.values())  # Polyak τ = 0.005


def test_a_seed_batch_of_tqcs_updates_each_seed_on_its_minibatch():
    """`stack`: two TQCs as one (`[S, E, B, M]` critics), each seed its own metrics; the
    batch's critic and target are the members' stacked."""
    from rltrain.algos.tqc import stack
    from rltrain.seed_batch.rng import SeedStreams

    streams, members = SeedStreams(), []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append(TQC(TQCConfig(hidden_sizes=[16, 16], n_quantiles=5), SPEC))
        streams.capture()
    algo = stack(members, streams)
    assert type(algo) is TQC
    b0, b1 = make_batch(seed=1), make_batch(seed=2)
    batch = TransitionBatch(*(torch.stack(pair) for pair in zip(b0[:5], b1[:5], strict=True)))
    assert algo.critic(batch.obs, batch.actions).shape == (2, 2, 32, 5)
    assert algo.target(batch).shape == (2, 32, 2 * 5 - 2 * 2)
    metrics = algo.update(batch, 0)
    assert len(metrics) == 2 and all("train/critic2_loss" in m for m in metrics)
    assert metrics[0]["train/q_loss"] != metrics[1]["train/q_loss"]
    assert algo.act(batch.obs, 0).shape == (2, 32, 2)


@pytest.mark.parametrize("fields", [{"n_quantiles": 1}, {"n_critics": 0},
                                    {"top_quantiles_to_drop_per_net": 25},
                                    {"top_quantiles_to_drop_per_net": -1}])
def test_config_refuses_a_target_without_quantiles(fields):
    with pytest.raises(UserError):
        TQCConfig(**fields).validate(None)


@pytest.mark.slow  # minutes on a shared 2-core machine: `make test-all` / `make bench-quality`
def test_tqc_learns_pendulum_swing_up_within_6000_steps(tmp_path):
    """SAC's check's settings (64x64, lr 1e-3, 500 random steps), 6000 steps: seed 0 evaluated
    −1579 / −1129 / −134 / −1128 / −98 / −97 (5 episodes) at 1k ... 6k here (2026-11-28; 4k was
    a dip, hence 6k); untrained scores ≈ −1600."""
    from rltrain.api import train

    overrides = ["algo=tqc", "env=Pendulum-v1", "seed=0", "total_timesteps=6000",
                 "env.num_envs=1", "algo.hidden_sizes=[64,64]", "algo.lr=1e-3",
                 "algo.learning_starts=500", "eval.episodes=5", *QUIET]
    result = train(overrides, run_dir=tmp_path)
    assert result["mean_reward"] > -600
