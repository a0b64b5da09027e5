"""`num_seeds=N` from the command line and the Python API: per-seed folders that every other
command reads, the batch summary, refusals, one seed failing alone, a STOP for the batch."""

from __future__ import annotations

import json

import pytest
import torch

from rltrain.config.compose import compose_train_config
from rltrain.seed_batch.runner import SeedRunner
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli
from tests.envs.small_runs import small_run

SMALL = ["algo=ppo", "env=CartPole-v1", "env.num_envs=4", "algo.n_steps=16",
         "algo.batch_size=32", "algo.n_epochs=2", "algo.hidden_sizes=[16]", "eval.episodes=2",
         "eval.num_envs=2", "progress=off"]


def test_batch_folders_are_single_runs(tmp_path, monkeypatch, capfd):
    run = tmp_path / "run"
    res = run_cli([*SMALL, "num_seeds=2", "seed=3", "total_timesteps=256", "checkpoint.freq=128",
                   f"hydra.run.dir={run}"], tmp_path, monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    assert "[seed 4] done" in res.err + res.out
    summary = json.loads((run / "seeds.json").read_text())
    assert summary["seeds"] == [3, 4] and set(summary["final_eval"]) == {"3", "4"}
    assert summary["failed"] == {} and summary["iqm"] == pytest.approx(
        sum(summary["final_eval"].values()) / 2)
    assert (summary["score"], summary["score_of"]) == (summary["iqm"], "iqm")  # what a trial returns
    assert (run / "report.csv").is_file() and (run / "learning_curves.png").is_file()
    for seed in (3, 4):
        sub = run / f"seed_{seed}"
        assert (sub / "checkpoints" / "final.pt").is_file()
        assert (sub / "metrics.csv").is_file() and (sub / "tb").is_dir()
        config = (sub / ".hydra" / "config.yaml").read_text()
        assert f"seed: {seed}\n" in config and "num_seeds: 1\n" in config
    # every per-seed command reads a seed's folder as the single run it is
    res = run_cli(["eval", f"ckpt={run}/seed_4/checkpoints/final.pt", "episodes=2"], tmp_path,
                  monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    res = run_cli([*SMALL, f"resume={run}/seed_4", "total_timesteps=384",
                   f"hydra.run.dir={run}/seed_4"], tmp_path, monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    assert "384" in (run / "seed_4" / "metrics.csv").read_text()


@pytest.mark.parametrize("argv,fragment", [
    (["num_seeds=0"], "num_seeds=0 must be >= 1"),
    (["num_seeds=2", "seeds_per_trial=2"], "keep one"),
    (["num_seeds=2", "algo=sac", "env=Pendulum-v1", "algo.use_sde=true"], "gSDE"),
    (["num_seeds=3", "seed=4294967294"], "4294967296"),
    (["num_seeds=2", "device=mps"], "the seed batch runs on cpu or cuda, not device=mps"),
])
def test_refusals_are_one_line(tmp_path, monkeypatch, capfd, argv, fragment):
    base = SMALL if "algo=sac" not in argv else ["progress=off"]
    res = run_cli([*base, "total_timesteps=64", f"hydra.run.dir={tmp_path / 'r'}", *argv],
                  tmp_path, monkeypatch, capfd)
    assert not (tmp_path / "r").exists()  # refused before any folder was made
    assert_refused(res, EXIT_USAGE, fragment)


def test_dict_observations_in_a_batch_are_refused_in_one_line(tmp_path, monkeypatch, capfd):
    """PPO's members could run seed by seed, but the batch stores observations as one tensor."""
    res = run_cli([*small_run("ppo", "tests.envs.dict_envs:CueTask"), "num_seeds=2",
                   f"hydra.run.dir={tmp_path / 'r'}"], tmp_path, monkeypatch, capfd)
    assert_refused(res, EXIT_USAGE, "cannot batch Dict or Tuple observations")


def _batch(tmp_path, *extra: str) -> SeedRunner:
    cfg = compose_train_config([*SMALL, "num_seeds=3", "total_timesteps=640",
                                "checkpoint.freq=128", "logger=none", *extra])
    return SeedRunner(cfg, tmp_path / "batch")


def test_a_batch_passes_its_members_flags_to_their_constructors(tmp_path):
    batch = SeedRunner(compose_train_config([*SMALL, "num_seeds=2", "logger=none"]),
                       tmp_path / "batch", overrides=["num_seeds=2"], stop_line=False)
    try:
        assert (batch.overrides, batch.stop_line) == (["num_seeds=2"], False)
        for member in batch.runners:  # the batch says these lines once; no evaluator per seed
            assert (member.setup_lines, member.stop_line, member.background_evals.allowed) == (
                False, False, False)
            assert member.resume_target == tmp_path / "batch" != member.run_dir
        for name, value in (("overrides", []), ("stop_line", True)):
            with pytest.raises(AttributeError, match=f"SeedRunner.{name} is set once"):
                setattr(batch, name, value)
        with pytest.raises(AttributeError, match="Runner.stop_line is set once"):
            batch.runners[0].stop_line = True
    finally:
        batch.close()


def test_a_diverging_seed_stops_alone(tmp_path, caplog):
    """Seed 1's weights turn NaN after its 3rd update: it stops with its last good checkpoint;
    seeds 0 and 2 train to the end; the summary and the console say which seed stopped."""
    runner = _batch(tmp_path)

    def poison(state):
        if state.iteration == 3:
            with torch.no_grad():
                for p in runner.batch.algo.algo.policy.parameters():  # stacked: [S, ...]
                    p[1].fill_(float("nan"))

    runner.runners[1].add_callback("post_update", poison)
    summary = runner.run()
    assert list(summary["failed"]) == ["1"] and "non-finite" in summary["failed"]["1"]
    assert set(summary["final_eval"]) == {"0", "2"}
    batch = tmp_path / "batch"
    assert (batch / "seed_0" / "checkpoints" / "final.pt").is_file()
    assert (batch / "seed_2" / "checkpoints" / "final.pt").is_file()
    assert not (batch / "seed_1" / "checkpoints" / "final.pt").exists()
    from rltrain.checkpoint import format as checkpoint

    latest = checkpoint.load(batch / "seed_1" / "checkpoints" / "latest.pt")
    assert all(torch.isfinite(t).all() for t in latest["algo"]["policy"].values())
    assert any("[seed 1] stopped" in r.getMessage() for r in caplog.records)


def test_stop_file_of_the_batch_stops_every_seed(tmp_path):
    runner = _batch(tmp_path)
    stop = tmp_path / "batch" / "STOP"
    runner.runners[0].add_callback(
        "post_update", lambda state: stop.touch() if state.iteration == 2 else None)
    summary = runner.run()
    assert set(summary["stopped"]) == {"0", "1", "2"} and not stop.exists()
    for seed in range(3):
        latest = tmp_path / "batch" / f"seed_{seed}" / "checkpoints" / "latest.pt"
        assert latest.is_file()
        assert not latest.with_name("final.pt").exists()


def test_an_optuna_trial_scores_the_iqm_of_its_batch(tmp_path, monkeypatch, capfd):
    """`+hpo=ppo num_seeds=3`: each trial trains its 3 seeds as one batch, in this process, and
    the sweeper maximises what the trial returned: the IQM in its seeds.json."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    import yaml

    folder = tmp_path / "hpo"
    res = run_cli(["-m", "+hpo=ppo", "debug=smoke", "env=CartPole-v1", "progress=off",
                   "num_seeds=3", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={folder}"],
                  tmp_path, monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    iqms = []
    for trial in (0, 1):
        summary = json.loads((folder / str(trial) / "seeds.json").read_text())
        assert len(summary["final_eval"]) == 3
        iqms.append(summary["iqm"])
    results = yaml.safe_load((folder / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(max(iqms))


def test_sigterm_stops_every_seed_of_a_batch(tmp_path):
    """A real process (a signal needs one): SIGTERM once both seeds have checkpointed; every
    seed writes latest.pt and the command exits 128 + 15, as a single run does."""
    import signal

    from tests.e2e.test_interrupt import LONG, Command

    run = tmp_path / "run"
    cmd = Command(["algo=ppo", *LONG, "num_seeds=2", f"hydra.run.dir={run}"], tmp_path / "io",
                  tmp_path)
    latest = [run / f"seed_{s}" / "checkpoints" / "latest.pt" for s in (0, 1)]
    cmd.wait_for(lambda: all(p.is_file() for p in latest))
    cmd.proc.send_signal(signal.SIGTERM)
    result = cmd.finish()
    assert result["rc"] == 128 + signal.SIGTERM, result["err"]
    summary = json.loads((run / "seeds.json").read_text())
    assert set(summary["stopped"]) == {"0", "1"}
    for path in latest:
        assert not path.with_name("final.pt").exists()
    assert "Traceback" not in result["err"]


SAC_SMALL = ["algo=sac", "env=Pendulum-v1", "algo.learning_starts=64", "algo.batch_size=16",
             "algo.hidden_sizes=[16]", "eval.episodes=2", "progress=off"]


@pytest.mark.parametrize("algo_args", [[*SMALL, "algo.anneal_lr=false"], SAC_SMALL,
                                       [*SMALL, "algo.anneal_lr=false", "algo.recurrent=lstm",
                                        "algo.recurrent_hidden_size=8"]],
                         ids=["ppo", "sac", "ppo_lstm"])
def test_resuming_a_batch_continues_every_seed_exactly(tmp_path, monkeypatch, capfd, algo_args):
    """A batch trained to 320 steps, then `resume=<batch> total_timesteps=640`, ends with the
    same weights and optimizer state, bit for bit, as the batch trained to 640 in one go (SAC:
    replay, targets, log α and its optimizer, the update counter included; PPO with an LSTM,
    seed by seed: the recurrent state and episode starts too)."""
    from rltrain.checkpoint import format as checkpoint

    common = [*algo_args, "num_seeds=2", "eval.freq=320", "checkpoint.freq=320",
              "checkpoint.save_buffer=true", "logger=none"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    for argv in ([*common, "total_timesteps=640", f"hydra.run.dir={whole}"],
                 [*common, "total_timesteps=320", f"hydra.run.dir={split}"],
                 [f"resume={split}", "total_timesteps=640"]):
        res = run_cli(argv, tmp_path, monkeypatch, capfd)
        assert res.rc == 0, res.describe()
    assert "resuming the batch" in res.err + res.out
    for seed in (0, 1):
        a = checkpoint.load(whole / f"seed_{seed}" / "checkpoints" / "final.pt")
        b = checkpoint.load(split / f"seed_{seed}" / "checkpoints" / "final.pt")
        assert b["counters"]["global_step"] == a["counters"]["global_step"] == 640
        _assert_same(a["algo"], b["algo"], f"seed {seed}")


def _assert_same(a, b, where: str) -> None:
    """Nested dicts/lists of tensors and numbers, equal bit for bit."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("algo,env_id,extra", [
    ("dqn", "CartPole-v1", ["algo.train_freq=4"]),
    ("sac", "Pendulum-v1", []),
    ("td3", "Pendulum-v1", []),
    ("ddpg", "Pendulum-v1", []),
])
def test_off_policy_batches(tmp_path, monkeypatch, capfd, algo, env_id, extra):
    run = tmp_path / algo
    res = run_cli([f"algo={algo}", f"env={env_id}", "num_seeds=2", "total_timesteps=300",
                   "algo.learning_starts=64", "algo.batch_size=16", "algo.hidden_sizes=[16]",
                   "eval.episodes=2", "progress=off", *extra, f"hydra.run.dir={run}"], tmp_path,
                  monkeypatch, capfd)
    assert res.rc == 0, res.describe()
    assert set(json.loads((run / "seeds.json").read_text())["final_eval"]) == {"0", "1"}
    res = run_cli(["eval", f"ckpt={run}/seed_1/checkpoints/final.pt", "episodes=2"], tmp_path,
                  monkeypatch, capfd)
    assert res.rc == 0, res.describe()
