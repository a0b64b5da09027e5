"""TD3: clipped target smoothing noise, min of twin targets, delayed actor updates."""

import torch

from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.td3 import TD3, smoothed
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(3,), action_kind="box", action_dim=2, num_envs=1)


def make_td3(**overrides) -> TD3:
    torch.manual_seed(0)
    return TD3(TD3Config(hidden_sizes=[16, 16], **overrides), SPEC)


def make_batch(n: int = 32, seed: int = 1) -> TransitionBatch:
    g = torch.Generator().manual_seed(seed)
    terminated = (torch.arange(n) % 2).float()
    return TransitionBatch(torch.randn(n, 3, generator=g), torch.rand(n, 2, generator=g) * 2 - 1,
                           torch.randn(n, generator=g), torch.randn(n, 3, generator=g), terminated)


def snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def changed(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


def test_target_smoothing_noise_is_clipped():
    algo = make_td3(target_noise=100.0, target_noise_clip=0.5)
    last = algo.actor_target.net[-1]
    torch.nn.init.zeros_(last.weight)  # μ'(s') = tanh(0) = 0, so the output is the noise itself
    torch.nn.init.zeros_(last.bias)
    with torch.no_grad():
        noise = smoothed(algo.actor_target(torch.randn(4096, 3)),
                         algo.target_noise(make_batch(4096)), algo.cfg)
    assert noise.abs().max() <= 0.5
    assert (noise.abs() == 0.5).float().mean() > 0.9  # σ = 100 almost always hits the clip


def test_target_uses_min_of_twin_target_critics():
    algo, batch = make_td3(gamma=0.9, target_noise=0.0), make_batch()
    with torch.no_grad():
        next_q = algo.critic_target(batch.next_obs, algo.actor_target(batch.next_obs))
    live = batch.terminated == 0
    for high in (0, 1):  # lift one critic by 10: the target must follow the other one
        with torch.no_grad():
            algo.critic_target.net[-1].bias[high] += 10.0
        y = algo.target(batch)
        low_q = next_q[1 - high]
        torch.testing.assert_close(y[live], batch.rewards[live] + 0.9 * low_q[live])
        with torch.no_grad():
            algo.critic_target.net[-1].bias[high] -= 10.0


def test_terminated_transition_target_is_reward_exactly():
    algo, batch = make_td3(), make_batch()
    y, done = algo.target(batch), batch.terminated == 1
    assert torch.equal(y[done], batch.rewards[done])
    assert (y[~done] != batch.rewards[~done]).all()


def test_actor_and_targets_update_only_on_policy_delay_steps():
    algo, batch = make_td3(policy_delay=3), make_batch()
    for step in range(7):
        actor0, actor_t0 = snapshot(algo.actor), snapshot(algo.actor_target)
        critic0, critic_t0 = snapshot(algo.critic), snapshot(algo.critic_target)
        algo.update(batch, global_step=step)
        delay_step = step % 3 == 0
        assert changed(critic0, algo.critic)  # the critics learn on every step
        assert changed(actor0, algo.actor) == delay_step
        assert changed(actor_t0, algo.actor_target) == delay_step
        assert changed(critic_t0, algo.critic_target) == delay_step


def test_metrics_are_flat_floats_with_both_critic_losses():
    algo, batch = make_td3(), make_batch()
    first, second = algo.update(batch, 0), algo.update(batch, 1)
    keys = {"train/actor_loss", "train/critic1_loss", "train/critic2_loss", "train/q_loss",
            "train/mean_q"}
    assert set(first) == set(second) == keys
    assert second["train/actor_loss"] == first["train/actor_loss"]  # kept from the delay step
    assert first["train/q_loss"] == (first["train/critic1_loss"] + first["train/critic2_loss"]) / 2
    assert all(type(v) is float for v in first.values())


def test_exploration_actions_stay_within_unit_box():
    action = make_td3(action_noise=5.0).act(torch.randn(512, 3) * 100, global_step=0)
    assert action.shape == (512, 2) and action.abs().max() <= 1.0


def test_state_dict_round_trips_through_weights_only_load(tmp_path):
    algo, batch = make_td3(), make_batch()
    for step in range(3):
        algo.update(batch, step)
    torch.save(algo.state_dict(), tmp_path / "td3.pt")
    torch.manual_seed(123)
    fresh = TD3(TD3Config(hidden_sizes=[16, 16]), SPEC)
    fresh.load_state_dict(torch.load(tmp_path / "td3.pt", weights_only=True))
    obs = torch.randn(16, 3)
    assert torch.equal(fresh.policy.act(obs), algo.policy.act(obs))
    assert fresh.n_updates == algo.n_updates == 3
    torch.manual_seed(7)
    algo.update(batch, 3)
    torch.manual_seed(7)
    fresh.update(batch, 3)  # same optimizer state, counter and noise -> same next step
    for a, b in zip(algo.actor.parameters(), fresh.actor.parameters(), strict=True):
        assert torch.equal(a, b)
