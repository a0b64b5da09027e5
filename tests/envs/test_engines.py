"""C++ env engines (`rltrain/envs/engines/`): EnvPool behind the VecEnv contract, `auto`'s choice,
and the refusals. The EnvPool tests skip where the `envpool` extra is not installed (CI); the
choice and refusal tests without it run everywhere."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltrain.envs.config import EnvConfig, WrapperConfig
from rltrain.envs.engines import choice
from rltrain.envs.engines import envpool as envpool_engine
from rltrain.envs.engines.choice import FASTER_FROM, choose
from rltrain.envs.engines.twins import NOT_TWINS, SPACES_DIFFER, TWINS, twin_problem
from rltrain.envs.families import family_of
from rltrain.envs.make import engine_note, make_env
from rltrain.errors import UserError
from tests.e2e.harness import run_cli

needs_envpool = pytest.mark.skipif(not envpool_engine.envpool_installed(),
                                   reason='needs "rltrain[envpool]"')


def _balance(obs: np.ndarray) -> np.ndarray:
    """CartPole actions that keep the pole up (angle and angular velocity), row by row."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


@needs_envpool
def test_envpool_gives_gymnasiums_transitions_on_episodes_ending_both_ways():
    """CartPole through EnvPool and through gymnasium's own CartPole, whose state is set to each
    of EnvPool's reset observations: rows 0-1 balance until the 60-step limit truncates them,
    rows 2-3 act at random until they fall (terminated). Every transition agrees: the reward,
    both flags, the true last observation of an ended episode (`final_obs`, not the reset one),
    the reset observation in `obs`, and the episode statistics."""
    n, limit = 4, 60
    env = make_env(EnvConfig(id="CartPole-v1", backend="envpool", num_envs=n,
                             max_episode_steps=limit))
    refs = [gym.make("CartPole-v1", max_episode_steps=limit) for _ in range(n)]
    obs = env.reset(seed=3).numpy()

    def restart(row: int, start: np.ndarray) -> None:
        refs[row].reset(seed=row)
        refs[row].unwrapped.state = start.astype(np.float64)

    for row in range(n):
        restart(row, obs[row])
    rng = np.random.default_rng(0)
    ended = {"terminated": 0, "truncated": 0}
    for _ in range(400):
        action = np.where(np.arange(n) < 2, _balance(obs), rng.integers(0, 2, n))
        res = env.step(torch.as_tensor(action))
        episodes = res.info.get("episode")
        for row in range(n):
            ref_obs, ref_reward, ref_term, ref_trunc, _ = refs[row].step(int(action[row]))
            assert res.reward[row].item() == ref_reward
            assert bool(res.terminated[row]) == ref_term
            assert bool(res.truncated[row]) == (ref_trunc and not ref_term)
            np.testing.assert_allclose(res.final_obs[row].numpy(), ref_obs, atol=1e-4)
            if ref_term or ref_trunc:
                ended["terminated" if ref_term else "truncated"] += 1
                assert row in episodes["index"]
                k = list(episodes["index"]).index(row)
                assert episodes["length"][k] == refs[row]._elapsed_steps
                assert not np.allclose(res.obs[row].numpy(), ref_obs)  # a fresh episode
                assert np.abs(res.obs[row].numpy()).max() <= 0.05  # CartPole's reset range
                restart(row, res.obs[row].numpy())
            else:
                np.testing.assert_array_equal(res.obs[row].numpy(), res.final_obs[row].numpy())
        obs = res.obs.numpy()
    assert ended["terminated"] >= 10 and ended["truncated"] >= 6, ended


@needs_envpool
def test_rows_are_seeded_per_row_so_a_batch_of_seeds_is_each_seed_alone():
    """Row i of `reset(seed=s)` is seeded `s + i`, and `reset(seed=[...])` gives each row its
    own: rows of seeds 5 and 9 stepped in one engine equal each seed's own engine."""
    def rollout(seed, n: int) -> np.ndarray:
        env = make_env(EnvConfig(id="Pendulum-v1", backend="envpool", num_envs=n))
        out = [env.reset(seed=seed).numpy()]
        for t in range(250):  # Pendulum's 200-step limit: every row resets once
            out.append(env.step(torch.full((n, 1), 0.3 if t % 2 else -0.7)).obs.numpy())
        env.close()
        return np.stack(out, axis=1)

    both = rollout([5, 6, 9, 10], 4)
    np.testing.assert_array_equal(both[:2], rollout(5, 2))
    np.testing.assert_array_equal(both[2:], rollout(9, 2))
    assert not np.array_equal(rollout(5, 2), rollout(6, 2))


@needs_envpool
def test_auto_steps_mujoco_with_envpool_from_the_measured_count_and_says_so():
    cfg = EnvConfig(id="Hopper-v5", backend="auto")
    many, one = FASTER_FROM["Hopper-v5"], 1
    env = make_env(cfg, num_envs=many)
    assert type(env.venv).__name__ == "SameStep"
    assert "EnvPool" in engine_note(env) and "env.backend=gymnasium" in engine_note(env)
    env.close()
    assert choose(cfg, one).backend == "gymnasium"  # one env: gymnasium measured faster
    mine = EnvConfig(id="Hopper-v5", backend="auto", kwargs={"ctrl_cost_weight": 0.01})
    assert choose(mine, many).backend == "gymnasium"  # a setting EnvPool cannot honour


def test_auto_without_envpool_steps_gymnasium_and_names_the_extra_once(monkeypatch):
    monkeypatch.setattr(choice, "envpool_installed", lambda: False)
    # Hopper measured 1.2x end to end: not worth a ~926 MB suggestion; at 1.3x it would be
    assert choose(EnvConfig(id="Hopper-v5", backend="auto"), 64) == choice.Engine("gymnasium")
    monkeypatch.setitem(choice.MEASURED, "Hopper-v5", 1.3)
    engine = choose(EnvConfig(id="Hopper-v5", backend="auto"), 64)
    assert engine.backend == "gymnasium"
    assert 'pip install "rltrain[envpool]"' in engine.note and "1.3x" in engine.note
    assert choose(EnvConfig(id="Hopper-v5", backend="auto"), 1).note is None
    # classic control measured only 1.1x faster: not worth a ~926 MB suggestion
    assert choose(EnvConfig(id="CartPole-v1", backend="auto"), 64) == choice.Engine("gymnasium")
    # EnvPool's LunarLander is not gymnasium's: installing it would not change the engine
    assert choose(EnvConfig(id="LunarLander-v3", backend="auto"), 64) == choice.Engine("gymnasium")
    assert choose(EnvConfig(id="ALE/Pong-v5", backend="auto"), 64).backend != "envpool"


@pytest.mark.parametrize("cfg, fragment", [
    (EnvConfig(id="CartPole-v1", backend="envpool",
               wrappers=[WrapperConfig(name="ClipReward")]), "env.wrappers"),
    (EnvConfig(id="Hopper-v5", backend="envpool", kwargs={"ctrl_cost_weight": 0.01}),
     "env.kwargs"),
    (EnvConfig(id="tests.envs.my_envs:make_corridor", backend="envpool"), "your module"),
    (EnvConfig(id="ALE/Pong-v5", backend="envpool"), "Atari preprocessing"),
    (EnvConfig(id="CartPole-v1", backend="envpool", vectorization="async"), "async"),
])
def test_what_envpool_cannot_honour_is_refused_naming_gymnasium(cfg, fragment):
    with pytest.raises(UserError, match="env.backend=gymnasium") as err:
        envpool_engine.check_envpool(cfg)
    assert fragment in str(err.value)


def test_the_wrappers_refusal_names_the_wrappers():
    cfg = EnvConfig(id="CartPole-v1", backend="envpool",
                    wrappers=[WrapperConfig(name="ClipReward", kwargs={"min_reward": 0}),
                              WrapperConfig(name="TimeAwareObservation")])
    with pytest.raises(UserError) as err:
        envpool_engine.check_envpool(cfg)
    assert "set here to ClipReward, TimeAwareObservation)" in str(err.value)
    assert "WrapperConfig" not in str(err.value)


@pytest.mark.parametrize("installed", [True, False])
def test_auto_picks_envpool_only_for_ids_checked_equal_to_gymnasiums(monkeypatch, installed):
    """Blackjack (other spaces), Pendulum (other dynamics), LunarLander (other bounds), Ant
    (other contact forces), toy text (not compared) step gymnasium at any count; the twins
    step EnvPool from the measured count, without importing it to decide."""
    monkeypatch.setattr(choice, "envpool_installed", lambda: installed)
    for env_id in ("Blackjack-v1", "Pendulum-v1", "LunarLander-v3", "Ant-v5", "FrozenLake-v1"):
        assert choose(EnvConfig(id=env_id, backend="auto"), 4096).backend == "gymnasium"
    pool = "envpool" if installed else "gymnasium"
    assert choose(EnvConfig(id="CartPole-v1", backend="auto"), 64).backend == pool
    assert choose(EnvConfig(id="CartPole-v1", backend="auto"), 32).backend == "gymnasium"
    assert choose(EnvConfig(id="Hopper-v5", backend="auto"), 8).backend == pool
    # HalfCheetah measured within 5% of gymnasium end to end; Walker2d, not measured, follows
    # MuJoCo's line, the latest of its measured ids (HalfCheetah's: never)
    for env_id in ("HalfCheetah-v5", "Walker2d-v5"):
        assert choose(EnvConfig(id=env_id, backend="auto"), 64).backend == "gymnasium"
    assert choose(EnvConfig(id="Hopper-v5", backend="auto"), 7).backend == "gymnasium"


def test_the_twin_table_is_consistent():
    assert not TWINS & set(SPACES_DIFFER) and not TWINS & set(NOT_TWINS)
    assert not set(SPACES_DIFFER) & set(NOT_TWINS)
    for env_id in TWINS:  # each twin in a family whose speed was measured
        assert (family_of(env_id) or "classic") in FASTER_FROM, env_id
        assert twin_problem(env_id) is None
    assert "unclipped velocity" in twin_problem("Pendulum-v1")
    assert twin_problem("Taxi-v3") == "is not compared with gymnasium's"


@pytest.mark.parametrize("env_id, fragment", [
    ("Blackjack-v1", "Box(0, 31, (3,), int32)"),
    ("LunarLander-v3", "bounds [1.2e-38, 3.4e38]"),
])
def test_envpool_on_an_id_whose_spaces_differ_is_refused_in_one_line(env_id, fragment):
    with pytest.raises(UserError) as err:
        envpool_engine.check_envpool(EnvConfig(id=env_id, backend="envpool"))
    text = str(err.value)
    assert "\n" not in text and fragment in text and "env.backend=gymnasium" in text


def test_envpool_named_on_an_env_not_checked_equal_says_so_once():
    engine = choose(EnvConfig(id="Pendulum-v1", backend="envpool"), 4)
    assert engine.backend == "envpool"
    assert "unclipped velocity" in engine.note and "training and evaluation" in engine.note
    assert choose(EnvConfig(id="CartPole-v1", backend="envpool"), 4) == choice.Engine("envpool")


def test_envpool_seeds_map_rltrains_range_one_to_one_into_int32():
    seeds = np.array([0, 7, 2**31 - 1, 2**31, 2**31 + 8, 2**32 - 1, 2**32, 2**32 + 5])
    got = envpool_engine.int32_seeds(seeds)
    assert got.dtype == np.int32
    assert got.tolist() == [0, 7, 2**31 - 1, -2**31, -2**31 + 8, -1, 0, 5]
    rng = np.random.default_rng(0)
    wide = rng.integers(0, 2**32, 10_000)
    assert len(set(envpool_engine.int32_seeds(wide).tolist())) == len(set(wide.tolist()))


def test_an_envpool_run_evaluates_without_envpool_only_where_its_env_is_gymnasiums(
        monkeypatch):
    monkeypatch.setattr(choice, "envpool_installed", lambda: False)
    cfg, said = choice.for_evaluation(EnvConfig(id="CartPole-v1", backend="envpool"))
    assert cfg.backend == "gymnasium" and "EnvPool is not installed" in said
    with pytest.raises(UserError) as err:
        choice.for_evaluation(EnvConfig(id="Pendulum-v1", backend="envpool"))
    assert 'pip install "rltrain[envpool]"' in str(err.value)
    assert "env.backend" not in str(err.value)  # eval takes no env.backend=
    auto = EnvConfig(id="CartPole-v1", backend="auto")
    assert choice.for_evaluation(auto) == (auto, None)
    monkeypatch.setattr(choice, "envpool_installed", lambda: True)
    with pytest.raises(UserError, match="video=true records gymnasium's Pendulum-v1"):
        choice.for_evaluation(EnvConfig(id="Pendulum-v1", backend="envpool"), video=True)


def test_envpool_not_installed_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setattr(envpool_engine, "envpool_installed", lambda: False)
    with pytest.raises(UserError, match=r'rltrain\[envpool\]') as err:
        envpool_engine.check_envpool(EnvConfig(id="CartPole-v1", backend="envpool"))
    assert "env.backend=gymnasium" in str(err.value)


@needs_envpool
def test_an_id_envpool_does_not_know_is_refused():
    with pytest.raises(UserError, match="EnvPool has no Taxi-v4; use env.backend=gymnasium"):
        envpool_engine.check_envpool(EnvConfig(id="Taxi-v4", backend="envpool"))


@needs_envpool
def test_an_envpool_run_evaluates_and_resumes_saying_its_episodes_restart(
        tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    common = ["algo=ppo", "env=CartPole-v1", "env.backend=envpool", "env.num_envs=4",
              "algo.n_steps=32", "algo.batch_size=64", "checkpoint.freq=128", "eval.freq=0",
              "progress=plain", f"hydra.run.dir={run}"]
    first = run_cli([*common, "total_timesteps=256"], tmp_path, monkeypatch, capfd)
    assert first.rc == 0, first.describe()
    more = run_cli([f"resume={run}", "total_timesteps=512"], tmp_path, monkeypatch, capfd)
    assert more.rc == 0, more.describe()
    assert "episodes restart" in more.out + more.err, more.describe()
    assert "envpool keeps its envs' state in C++" in more.out + more.err, more.describe()
    ev = run_cli(["eval", f"ckpt={run}/checkpoints/final.pt", "episodes=3"], tmp_path,
                 monkeypatch, capfd)
    assert ev.rc == 0, ev.describe()


@needs_envpool
@pytest.mark.orders
@pytest.mark.parametrize("algo, extra", [("ppo", ["env.num_envs=4", "algo.n_steps=32",
                                                  "algo.batch_size=64"]),
                                         ("dqn", ["algo.learning_starts=64"])])
def test_a_seed_batch_steps_one_engine_and_each_seed_gets_its_single_runs_results(
        tmp_path, algo, extra):
    """`num_seeds=3` on EnvPool steps one engine of 3 x N rows (said in the start lines), and
    each seed ends where its single run on its own engine ends: the same transitions, so the
    same counters, and weights apart by no more than the two kernel orders allow (each tensor
    within `MOVED` of how far it moved: tests/seed_batch/helpers.py says why)."""
    import dataclasses

    import rltrain
    from rltrain.checkpoint import format as checkpoint
    from rltrain.config.compose import compose_train_config
    from rltrain.runner.runner import Runner
    from tests.seed_batch.helpers import MOVED, assert_parameters_follow

    common = [f"algo={algo}", "env=CartPole-v1", "env.backend=envpool", "total_timesteps=384",
              "eval.freq=0", "eval.episodes=1", "checkpoint.freq=0", "progress=off", *extra]
    rltrain.train([*common, "num_seeds=3", "seed=4"], run_dir=tmp_path / "batch")
    log = (tmp_path / "batch" / "train.log").read_text()
    assert "the 3 seeds step one engine of 3 x" in log, log
    net = "policy" if algo == "ppo" else "q_net"
    for seed in (4, 6):
        cfg = dataclasses.replace(compose_train_config([*common, f"seed={seed}"]), num_seeds=1)
        single = Runner(cfg, tmp_path / f"alone_{seed}")
        start = {k: v.detach().clone() for k, v in single.algo.state_dict()[net].items()}
        single.run()
        batch = checkpoint.load(tmp_path / "batch" / f"seed_{seed}" / "checkpoints" / "final.pt")
        alone = checkpoint.load(tmp_path / f"alone_{seed}" / "checkpoints" / "final.pt")
        assert batch["counters"] == alone["counters"]
        assert_parameters_follow(batch["algo"][net], alone["algo"][net], start, MOVED,
                                 f"seed {seed}")
