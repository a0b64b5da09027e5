"""`rltrain.train` from Python: checked as the command line checks, refusing (one line) what
only the command line does, and leaving the caller's process as it found it (threads, Hydra,
run folders)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch

from rltrain.algos.configs.ppo import PPOConfig
from rltrain.api import train
from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import EnvConfig, EvalConfig, TrainConfig
from rltrain.errors import UserError

TINY = ["algo=ppo", "env=CartPole-v1", "total_timesteps=64", "env.num_envs=2", "algo.n_steps=32",
        "algo.batch_size=32", "algo.hidden_sizes=[8]", "eval.episodes=1", "eval.num_envs=1",
        "logger=none", "progress=off", "checkpoint.freq=0"]


def tiny_config(**fields) -> TrainConfig:
    return TrainConfig(algo=PPOConfig(n_steps=32, batch_size=32, hidden_sizes=[8]),
                       env=EnvConfig(id="CartPole-v1", num_envs=2), total_timesteps=64,
                       progress="off", **fields)


def test_a_train_config_is_validated_like_a_command_line(tmp_path):
    """It trained with lr=-1; a float eval.freq wrote checkpoints no load accepted."""
    bad = tiny_config()
    bad.algo.lr = -1.0
    with pytest.raises(UserError, match=r"algo.lr=-1.0 must be a finite number > 0"):
        train(bad, run_dir=tmp_path / "bad")
    assert bad.algo.lr == -1.0 and not (tmp_path / "bad").exists()
    given = tiny_config(eval=EvalConfig(episodes=1, freq=32.0))
    train(given, run_dir=tmp_path / "run")
    assert given.eval.freq == 32.0  # the caller's object is left as it is
    assert checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")  # loads again
    with pytest.raises(UserError, match=r"needs algo=<an algorithm config>"):
        train(TrainConfig(env=EnvConfig(id="CartPole-v1")), run_dir=tmp_path / "x")


@pytest.mark.parametrize("extra, fragment", [
    (["seed=0,1,2"], "train() runs one job: sweeps (seed=0,1,2) are for `rltrain -m`"),
    (["hydra.run.dir=elsewhere"], "hydra.run.dir=elsewhere is a command-line option"),
    (["-m"], "-m is a command-line option"),
    (["+hpo=ppo"], "train() runs one job: a search (+hpo=...) is for the command line"),
    (["hydra/launcher=basic"], "hydra/launcher=basic is a command-line option")])
def test_what_only_the_command_line_does_is_refused_not_ignored(extra, fragment, tmp_path,
                                                                monkeypatch):
    """Sweeps ran their first value; hydra.run.dir was not the run's folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as err:
        train([*TINY, *extra])
    assert fragment in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_seeds_per_trial_trains_each_seed_in_its_folder_and_returns_the_trial(tmp_path):
    """It trained seed 0 alone, into the run folder itself."""
    result = train([*TINY, "seeds_per_trial=2", "seed=3"], run_dir=tmp_path / "trial")
    assert result["seeds"] == [3, 4] and len(result["mean_rewards"]) == 2
    assert result["mean_reward"] == pytest.approx(sum(result["mean_rewards"]) / 2)
    assert (result["score"], result["score_of"]) == (result["mean_reward"], "mean")
    for seed in (3, 4):
        assert (tmp_path / "trial" / f"seed_{seed}" / "checkpoints" / "final.pt").is_file()
    assert json.loads((tmp_path / "trial" / "seeds.json").read_text()) == result


def test_runs_without_run_dir_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    """The second run met the first's folder: "holds a finished run"."""
    from datetime import datetime

    from rltrain.checkpoint import run_dir

    monkeypatch.chdir(tmp_path)
    moment = datetime(2026, 11, 26, 13, 0, 0)
    claimed = [run_dir.claim_default_run_dir(moment) for _ in range(3)]
    assert [p.name for p in claimed] == ["13-00-00", "13-00-00-1", "13-00-00-2"]
    monkeypatch.setattr(run_dir, "datetime", type("Frozen", (), {"now": staticmethod(
        lambda: moment)}))  # every run below starts "in the same second"
    for _ in range(2):
        train(TINY)
    runs = sorted(p for p in (tmp_path / "outputs").glob("*/*") if p.is_dir())
    assert [r.name for r in runs] == ["13-00-00", "13-00-00-1", "13-00-00-2", "13-00-00-3",
                                      "13-00-00-4"]
    assert all((r / "checkpoints" / "final.pt").is_file() for r in runs[3:])


def test_a_callback_stop_is_reported_as_a_callback(tmp_path):
    """It was reported as "a stop on another rank" in a single process."""
    def stop(state):
        state.stop = True

    result = train(TINY, run_dir=tmp_path / "run", callbacks={"post_update": [stop]})
    assert result["stopped"] == "callback"


@pytest.mark.parametrize("run_dir", ["run", None])
def test_a_chdir_of_the_callers_mid_run_leaves_the_run_in_one_folder(run_dir, tmp_path,
                                                                     monkeypatch):
    """A relative run_dir (or the default outputs/...) was resolved again at each write: a
    callback (or another thread) that changed the working folder split the run's files, the
    checkpoints and its .hydra record landing in the new folder."""
    (tmp_path / "app").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "app")

    def wander(state):
        monkeypatch.chdir(tmp_path / "elsewhere")

    train(TINY, run_dir=run_dir, callbacks={"post_update": [wander]})
    assert list((tmp_path / "elsewhere").iterdir()) == []
    runs = [p.parent for p in (tmp_path / "app").rglob("train.log")]
    assert len(runs) == 1
    assert (runs[0] / "checkpoints" / "final.pt").is_file()
    assert (runs[0] / ".hydra" / "overrides.yaml").is_file()
    if run_dir is None:
        return
    monkeypatch.chdir(tmp_path / "app")  # a resume of the relative folder: its record too
    train(["resume=run", "total_timesteps=128"], callbacks={"post_update": [wander]})
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert (runs[0] / ".hydra" / "resume" / "overrides.yaml").is_file()


@pytest.mark.parametrize("threads", [1, 0])
def test_a_run_gives_the_callers_torch_threads_back(threads, tmp_path):
    """`torch_threads=1` stayed set after the run: the caller's process, and the next run's
    "torch's default" (torch_threads=0), were left at 1 thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(2 if before != 2 else 3)
    mine = torch.get_num_threads()
    try:
        train([*TINY, f"torch_threads={threads}"], run_dir=tmp_path / "run")
        assert torch.get_num_threads() == mine
    finally:
        torch.set_num_threads(before)


DENORMAL = 1e-39  # below float32's smallest normal (~1.18e-38)


def flushed() -> bool:
    """Whether this thread computes with denormals flushed to zero now."""
    return bool((torch.tensor([DENORMAL]) * 1.0).item() == 0.0)


@pytest.mark.parametrize("flush", [True, False])
def test_a_run_trains_with_denormals_flushed_and_gives_the_mode_back(flush, tmp_path):
    """`flush_denormal=true` (the default): Adam's moments of near-zero gradients were denormal
    floats, ~10x slower on the CPU. The training loop runs flushed; the caller's thread is left
    computing denormals as torch's default does."""
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush denormals")
    seen = []
    train([*TINY, f"flush_denormal={str(flush).lower()}"], run_dir=tmp_path / "run",
          callbacks={"post_update": [lambda *_: seen.append(flushed())]})
    assert seen and set(seen) == {flush}
    assert not flushed()


def test_a_callers_hydra_is_still_there_after_train(tmp_path):
    """train() cleared Hydra's global state: the caller's next hydra.compose failed with
    "GlobalHydra is not initialized"."""
    from hydra import compose, initialize_config_dir

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "app.yaml").write_text("answer: 42\n")
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        train(TINY, run_dir=tmp_path / "run")
        assert compose(config_name="app").answer == 42


def test_a_resume_from_the_command_line_checks_algo_fields_against_the_saved_algorithm(
        tmp_path, monkeypatch, capfd):
    """`resume=<a DQN run> algo.learning_starts=...` was "unknown field" (checked against the
    default algorithm, PPO); now against DQN's: a restated value resumes, a changed one is
    refused for what it is."""
    from tests.e2e.harness import assert_refused, run_cli

    train(["algo=dqn", "env=CartPole-v1", "total_timesteps=200", "algo.learning_starts=100",
           "algo.hidden_sizes=[8]", "algo.lr_decay_steps=1000", "eval.episodes=1",
           "logger=none", "progress=off"], run_dir=tmp_path / "dqn")
    changed = run_cli(["resume=dqn", "total_timesteps=300", "algo.learning_starts=150"],
                      tmp_path, monkeypatch, capfd)
    assert_refused(changed, 2, "algo.learning_starts: 100 -> 150")
    same = run_cli(["resume=dqn", "total_timesteps=300", "algo.learning_starts=100"], tmp_path,
                   monkeypatch, capfd)
    assert same.rc == 0, same.describe()
    assert checkpoint.load(tmp_path / "dqn" / "checkpoints" / "final.pt")["counters"][
        "global_step"] == 300
    # the option comes from the run's own record (a checkpoint's `name: ppo` is also ppo_lstm's),
    # so the resume repeats it and `rltrain report` keeps the run's group
    from rltrain.report.runs import load_run

    assert load_run(tmp_path / "dqn").group == ("algo.hidden_sizes=[8] algo.learning_starts=100 "
                                                "algo.lr_decay_steps=1000 algo=dqn "
                                                "env=CartPole-v1 eval.episodes=1 logger=none "
                                                "total_timesteps=300")
    assert Path(tmp_path / "dqn").is_dir()


def test_a_resume_from_python_checks_algo_fields_against_the_saved_algorithm(tmp_path,
                                                                            monkeypatch):
    """train(["resume=<a SAC run>", "algo.lr_decay_steps=..."]) was "unknown field" (composed
    with the default algorithm, PPO): the run's algo= comes first, as on the command line; the
    decay stretched with the budget, the run trains on to the new end."""
    monkeypatch.chdir(tmp_path)
    train(["algo=sac", "env=Pendulum-v1", "total_timesteps=300", "algo.learning_starts=100",
           "algo.hidden_sizes=[8]", "algo.lr_decay_steps=${total_timesteps}", "eval.episodes=1",
           "logger=none", "progress=off"], run_dir="sac")
    with pytest.raises(UserError, match="add algo.lr_decay_steps=600 to stretch the decay"):
        train(["resume=sac", "total_timesteps=600"])
    train(["resume=sac", "total_timesteps=600", "algo.lr_decay_steps=${total_timesteps}"])
    saved = checkpoint.load(tmp_path / "sac" / "checkpoints" / "final.pt")
    assert saved["counters"]["global_step"] == 600
    assert saved["config"]["algo"]["lr_decay_steps"] == 600


def test_a_runner_given_resume_without_a_checkpoint_never_trains_over_a_finished_run(tmp_path):
    """`Runner(cfg)` with `cfg.resume` set but no `resume_from` payload starts from scratch:
    it opened the finished run's folder as a resume would, and overwrote its final.pt."""
    import dataclasses

    from rltrain.runner.runner import Runner

    train(TINY, run_dir=tmp_path / "run")
    final = (tmp_path / "run" / "checkpoints" / "final.pt").read_bytes()
    cfg = dataclasses.replace(tiny_config(), resume=str(tmp_path / "run"), total_timesteps=128)
    with pytest.raises(UserError, match="holds a finished run"):
        Runner(cfg, tmp_path / "run").run()
    assert (tmp_path / "run" / "checkpoints" / "final.pt").read_bytes() == final


def test_a_python_run_has_the_log_and_record_of_a_command_line_run(tmp_path, caplog):
    """API runs had no train.log and no .hydra/ record: `rltrain report` put each seed of an
    experiment in a group of its own. (INFO: what train() sets up in a session without logging
    of its own; pytest has its own handlers.)"""
    import logging

    from rltrain.report.runs import load_run

    for seed in (0, 1):
        with caplog.at_level(logging.INFO, logger="rltrain"):
            train([*TINY, f"seed={seed}"], run_dir=tmp_path / f"s{seed}")
    runs = [load_run(tmp_path / f"s{seed}") for seed in (0, 1)]
    assert runs[0].group == runs[1].group and "seed" not in runs[0].group
    assert {r.seed for r in runs} == {0, 1}
    log_text = (tmp_path / "s0" / "train.log").read_text()
    assert "training ppo on CartPole-v1" in log_text
    # the preset line, as the command line's train.log has it (it went to the console only)
    assert "applied tuned preset conf/tuned/ppo_cartpole.yaml" in log_text


def test_a_python_run_refused_at_start_writes_nothing(tmp_path, monkeypatch):
    """A finished run's folder gets no log line and no record from a refused train(); a
    default folder claimed for a run whose env cannot be built is not left behind."""
    train(TINY, run_dir=tmp_path / "run")
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    log_before = (tmp_path / "run" / "train.log").read_text()
    with pytest.raises(UserError, match="holds a finished run"):
        train(TINY, run_dir=tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before
    assert (tmp_path / "run" / "train.log").read_text() == log_before
    monkeypatch.chdir(tmp_path / "run")
    with pytest.raises(UserError):
        train([*TINY[:1], "env.id=tests.envs.state_envs:DequeStateEnv",
               "env.import=tests.envs.state_envs", *TINY[2:]])
    assert not list((tmp_path / "run" / "outputs").glob("*/*"))


def test_a_runner_builds_its_networks_with_the_threads_it_trains_with(tmp_path, monkeypatch):
    """Initial weights depend on the thread count (orthogonal init's QR): built at the
    process's 2 threads, `make train`'s Pendulum run ended at -98.35 instead of -97.64."""
    from rltrain.algos import ppo
    from rltrain.config.compose import compose_train_config
    from rltrain.runner.runner import Runner

    seen = []
    real = ppo.build

    def build(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(ppo, "build", build)  # what the table's entry calls when a run builds
    before = torch.get_num_threads()
    torch.set_num_threads(2 if before != 2 else 3)
    mine = torch.get_num_threads()
    try:
        Runner(compose_train_config(TINY), tmp_path / "run")
        assert seen == [1] and torch.get_num_threads() == mine
    finally:
        torch.set_num_threads(before)


def test_resume_from_python_continues_the_run_as_the_command_line_does(tmp_path):
    """`resume=` was ignored: a from-scratch run, and with run_dir= a finished run's folder it
    trained over it. It now continues from the checkpoint, with the command line's rules."""
    def stop_at_64(state):
        state.stop = state.global_step >= 64

    first = [*TINY, "total_timesteps=192"]
    train(first, run_dir=tmp_path / "run", callbacks={"post_iteration": [stop_at_64]})
    assert checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")["counters"][
        "global_step"] == 64
    result = train([*first, f"resume={tmp_path / 'run'}"])
    final = checkpoint.load(tmp_path / "run" / "checkpoints" / "final.pt")
    assert final["counters"]["global_step"] == 192 and result["step"] == 192
    with pytest.raises(UserError, match="has trained 192 env steps, more than total_timesteps=128"):
        train([*TINY, f"resume={tmp_path / 'run'}", "total_timesteps=128"])
    with pytest.raises(UserError, match=r"would change the experiment \(algo.lr"):
        train([*TINY, "algo.lr=0.1", f"resume={tmp_path / 'run'}", "total_timesteps=256"])
    with pytest.raises(UserError, match="give them as a list"):
        train(tiny_config(resume=str(tmp_path / "run")))


def test_seed_folders_from_python_are_grouped_by_their_experiment(tmp_path):
    """`num_seeds` seeds were recorded with `seed=<s>` alone (batches of other settings fell
    into one "(defaults)" group), `seeds_per_trial` seeds with nothing (a group each)."""
    from rltrain.report.runs import find_runs, load_run

    train([*TINY, "num_seeds=2", "algo.lr=0.001"], run_dir=tmp_path / "batch_a")
    train([*TINY, "num_seeds=2", "algo.lr=0.01"], run_dir=tmp_path / "batch_b")
    train([*TINY, "seeds_per_trial=2", "algo.lr=0.001"], run_dir=tmp_path / "trial")
    groups = {}
    for path in find_runs(tmp_path):
        groups.setdefault(load_run(path).group, []).append(path.relative_to(tmp_path).as_posix())
    assert sorted(map(sorted, groups.values())) == [  # the same settings: one experiment
        ["batch_a/seed_0", "batch_a/seed_1", "trial/seed_0", "trial/seed_1"],
        ["batch_b/seed_0", "batch_b/seed_1"]], groups
    assert all("algo.lr=" in g and "seed" not in g for g in groups)


class RltrainLevels(logging.Handler):
    """An application's handler: the levels of the rltrain records it received."""

    def __init__(self):
        super().__init__()
        self.levels: list[int] = []

    def emit(self, record):
        if record.name.startswith("rltrain"):
            self.levels.append(record.levelno)


def test_train_log_gets_rltrains_lines_where_the_callers_logging_hides_them(tmp_path, monkeypatch):
    """An application (or pytest) with its root logger at WARNING: train.log stayed empty (never
    created), as the README says every run folder has one. The file gets the INFO lines; the
    caller's own handler still sees only what its level let through, and rltrain's logger is
    given back as it was."""

    root, own = logging.getLogger(), logging.getLogger("rltrain")
    seen = RltrainLevels()
    monkeypatch.setattr(root, "handlers", [seen])  # the app's own (earlier tests' left here)
    level = root.level
    root.setLevel(logging.WARNING)  # (setLevel: also clears the loggers' cached levels)
    try:
        train(TINY, run_dir=tmp_path / "run")
    finally:
        root.setLevel(level)
    assert "training ppo on CartPole-v1" in (tmp_path / "run" / "train.log").read_text()
    assert all(level >= logging.WARNING for level in seen.levels), seen.levels
    assert (own.level, own.propagate, own.handlers) == (logging.NOTSET, True, [])


def test_train_log_gets_rltrains_lines_after_a_dictconfig_disabled_its_loggers(tmp_path,
                                                                            monkeypatch):
    """An application's `logging.config.dictConfig` (disable_existing_loggers: true, its
    default) after importing rltrain: train.log was never created. The file gets the run's
    lines; the application's handlers still get none, and the loggers stay disabled after."""
    import logging.config

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    before = {name: lg.disabled for name, lg in logging.root.manager.loggerDict.items()
              if isinstance(lg, logging.Logger)}
    level = root.level
    seen = RltrainLevels()
    try:
        logging.config.dictConfig({"version": 1, "handlers": {"app": {"class": "logging.NullHandler"}},
                                   "root": {"handlers": ["app"], "level": "INFO"}})
        root.addHandler(seen)
        muted = [n for n in before if n.startswith("rltrain") and logging.getLogger(n).disabled]
        assert "rltrain" in muted  # rltrain's logger, as the app left it
        train(TINY, run_dir=tmp_path / "run")
        assert all(logging.getLogger(n).disabled for n in muted)
    finally:
        for name, disabled in before.items():
            logging.getLogger(name).disabled = disabled
        root.setLevel(level)
    assert "training ppo on CartPole-v1" in (tmp_path / "run" / "train.log").read_text()
    assert seen.levels == []


def test_train_evaluate_and_export_leave_the_callers_process_as_they_found_it(
        tmp_path, monkeypatch, capfd):
    """An application's random streams, default dtype, grad mode and logging, each changed by
    a call from Python before (`rltrain/guest.py`): train() re-seeded the global generators
    (the app's next draws were seed 0's), left logging.basicConfig(INFO) on the root, failed
    under torch.no_grad() or with float64 as the default dtype."""
    import random

    import numpy as np

    from rltrain.evaluation.command import evaluate
    from rltrain.export.command import export_policy

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # an app that set up no logging
    level = root.level

    def draws():
        return (torch.rand(2).tolist(), np.random.rand(2).tolist(), random.random())

    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    expected = draws()
    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad():
            result = train(TINY, run_dir=tmp_path / "run")
            evaluate(tmp_path / "run", episodes=2, num_envs=2, write=False)
            export_policy(tmp_path / "run", "torchscript", out=tmp_path / "p.pt", check_samples=10)
            assert not torch.is_grad_enabled()
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert draws() == expected
    assert torch.isfinite(torch.tensor(result["mean_reward"]))
    assert root.handlers == [] and root.level == level
    assert "[INFO] training ppo on CartPole-v1" in capfd.readouterr().err  # the console had it
    own = logging.getLogger("rltrain")
    assert (own.level, own.propagate, own.handlers) == (logging.NOTSET, True, [])


def test_an_apps_own_settings_of_the_rltrain_logger_hold_during_a_run(tmp_path, monkeypatch):
    """The app gave the `rltrain` logger its own handler at WARNING and stopped propagation:
    that handler received every INFO line of the run, and WARNINGs reached the root anyway."""

    own, root = logging.getLogger("rltrain"), logging.getLogger()
    mine, at_root = RltrainLevels(), RltrainLevels()
    monkeypatch.setattr(root, "handlers", [at_root])
    monkeypatch.setattr(own, "handlers", [mine])
    monkeypatch.setattr(own, "propagate", False)
    own.setLevel(logging.WARNING)
    try:
        stale = tmp_path / "run" / "STOP"  # a stop file left from before: a WARNING, logged
        stale.parent.mkdir()
        stale.write_text("")
        train(TINY, run_dir=tmp_path / "run")
        assert own.handlers == [mine] and own.level == logging.WARNING and not own.propagate
    finally:
        own.setLevel(logging.NOTSET)
    assert mine.levels and all(level >= logging.WARNING for level in mine.levels), mine.levels
    assert at_root.levels == []
    assert "training ppo on CartPole-v1" in (tmp_path / "run" / "train.log").read_text()


def test_a_batch_started_from_python_has_its_log_and_resumes_from_python_and_the_cli(
        tmp_path, monkeypatch, capfd):
    """A `num_seeds` batch from train() had no train.log and no `.hydra/` record of its own,
    so `resume=<batch>` said "no checkpoints/latest.pt under ...". A batch resumes from
    train() as from the command line (train() refused it: "resume it with `rltrain ...`")."""
    from tests.e2e.harness import run_cli

    batch = tmp_path / "batch"
    train([*TINY, "num_seeds=2", "checkpoint.freq=32"], run_dir=batch)
    assert "training 2 seeds (0, 1) as one batch" in (batch / "train.log").read_text()
    summary = train([f"resume={batch}", "num_seeds=2", "total_timesteps=128"])
    assert summary["seeds"] == [0, 1] and sorted(summary["final_eval"]) == ["0", "1"]
    for seed in (0, 1):
        final = checkpoint.load(batch / f"seed_{seed}" / "checkpoints" / "final.pt")
        assert final["counters"]["global_step"] >= 128
    with pytest.raises(UserError, match="num_seeds=3 would change the batch"):
        train([f"resume={batch}", "num_seeds=3", "total_timesteps=192"])
    done = run_cli([f"resume={batch}", "total_timesteps=192"], tmp_path, monkeypatch, capfd)
    assert done.rc == 0, done.describe()
    for seed in (0, 1):
        final = checkpoint.load(batch / f"seed_{seed}" / "checkpoints" / "final.pt")
        assert final["counters"]["global_step"] >= 192


def test_a_resume_from_python_logs_to_the_run_and_records_itself_as_the_cli_does(tmp_path):
    """train(["resume=<run>"]) left train.log as it was and wrote no `.hydra/resume/`, where
    `rltrain resume=` adds its lines and its record (which `rltrain report` merges)."""
    from omegaconf import OmegaConf

    run = tmp_path / "run"
    train([*TINY, "checkpoint.freq=32"], run_dir=run)
    (run / "checkpoints" / "final.pt").unlink()
    before = (run / "train.log").read_text()
    train([f"resume={run}", "total_timesteps=96"])
    log = (run / "train.log").read_text()
    assert log.startswith(before) and f"resuming {run}" in log[len(before):]
    assert "done: 96 env steps" in log[len(before):]
    assert f"resume={run}" in OmegaConf.load(run / ".hydra" / "resume" / "overrides.yaml")
    assert OmegaConf.load(run / ".hydra" / "resume" / "config.yaml").total_timesteps == 96


@pytest.mark.parametrize("bad, message", [
    (lambda: TrainConfig(algo=PPOConfig(lr="abc"), env=EnvConfig(id="CartPole-v1")),
     "lr=abc: expected float, got str"),
    (lambda: TrainConfig(algo=PPOConfig(hidden_sizes="16"), env=EnvConfig(id="CartPole-v1")),
     "hidden_sizes: expected a list"),
    (lambda: TrainConfig(algo=PPOConfig(), env=EnvConfig(id="CartPole-v1"), seed="x"),
     "seed=x: expected integer, got str"),
    (lambda: "algo=ppo env=CartPole-v1",
     "train() takes a list of overrides, not one string: train(['algo=ppo', 'env=CartPole-v1'])"),
])
def test_wrong_types_given_to_train_are_one_line(bad, message, tmp_path):
    """A TrainConfig built in Python with a string where a number belongs met a TypeError deep
    in validation; one string of overrides was read character by character."""
    with pytest.raises(UserError, match=re.escape(message)):
        train(bad(), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_train_from_a_second_thread_is_refused_in_one_line(tmp_path):
    """Two threads at once: one failed with Hydra's "GlobalHydra is already initialized", and
    when both ran, each run's train.log held the other's lines."""
    import threading

    from rltrain import api

    errors: list[Exception] = []
    api._BUSY.acquire()  # as if another thread were training
    try:
        worker = threading.Thread(target=lambda: _catch(errors, tmp_path / "b"))
        worker.start()
        worker.join(60)
    finally:
        api._BUSY.release()
    assert len(errors) == 1 and isinstance(errors[0], UserError)
    assert "already running in another thread" in str(errors[0])
    assert not (tmp_path / "b").exists()


def _catch(errors: list[Exception], run_dir) -> None:
    try:
        train(TINY, run_dir=run_dir)
    except Exception as exc:  # noqa: BLE001 - collected for the test thread
        errors.append(exc)


def test_train_into_a_folder_it_cannot_write_is_one_line(tmp_path, monkeypatch):
    """A read-only folder gave a PermissionError from Python (the command line says it)."""
    import os

    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path.absolute())
    with pytest.raises(UserError, match=r"train writes the run into .*run, and .* is not writable"):
        train(TINY, run_dir=tmp_path / "run")


def test_ctrl_c_during_train_saves_the_run_then_reaches_the_caller(tmp_path, request):
    """train() stopped gracefully on Ctrl-C and returned {"stopped": "SIGINT"}: an application
    looping over runs went on to the next one. The checkpoint is saved, then the caller gets
    its KeyboardInterrupt."""
    import os
    import signal

    def press_ctrl_c(state):
        if state.iteration == 1:
            os.kill(os.getpid(), signal.SIGINT)

    # the caller's handler is Python's default: a suite started in the background (`make test
    # &`, nohup) inherits SIGINT ignored, and then the signal passed on is ignored too, rightly
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    with pytest.raises(KeyboardInterrupt):
        train([*TINY, "total_timesteps=256"], run_dir=tmp_path / "run",
              callbacks={"post_iteration": [press_ctrl_c]})
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert 0 < saved["counters"]["global_step"] < 256
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_resume_checks_its_overrides_against_the_runs_own_preset(tmp_path, monkeypatch, capfd):
    """`resume=<a PPO CartPole run> env.num_envs=4` was refused for the default env's preset
    (Pendulum's batch of 2048 does not divide 4 x its n_steps), not for what it does: change the
    experiment. The run's `env=` choice now comes first too; a run started with `env.id=` (no
    preset) resumes with its own config."""
    from tests.e2e.harness import assert_refused, run_cli

    tiny = ["total_timesteps=256", "algo.n_steps=16", "algo.batch_size=64", "eval.episodes=1",
            "logger=none", "progress=off"]
    assert run_cli(["algo=ppo", "env=cartpole", *tiny, "hydra.run.dir=preset"], tmp_path,
                   monkeypatch, capfd).rc == 0
    refused = run_cli(["resume=preset", "total_timesteps=512", "env.num_envs=4"], tmp_path,
                      monkeypatch, capfd)
    assert_refused(refused, 2, "would change the experiment (env.num_envs: 8 -> 4)")
    assert run_cli(["algo=ppo", "env.id=CartPole-v1", "env.num_envs=4", *tiny,
                    "hydra.run.dir=plain"], tmp_path, monkeypatch, capfd).rc == 0
    for run in ("preset", "plain"):
        resumed = run_cli([f"resume={run}", "total_timesteps=512"], tmp_path, monkeypatch, capfd)
        assert resumed.rc == 0, resumed.describe()
        assert checkpoint.load(tmp_path / run / "checkpoints" / "final.pt")["counters"][
            "global_step"] == 512


def test_with_saved_choices_puts_the_runs_choices_first_unless_given(tmp_path):
    from rltrain.run_folder.find import with_saved_choices

    hydra = tmp_path / "run" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "overrides.yaml").write_text(
        "- algo=ppo_lstm\n- env.id=CartPole-v1\n- ~tuned\n- env.num_envs=2\n- seed=3\n")
    run = str(tmp_path / "run")
    assert with_saved_choices([f"resume={run}", "total_timesteps=9"]) == [
        "algo=ppo_lstm", "env.id=CartPole-v1", "~tuned", f"resume={run}", "total_timesteps=9"]
    assert with_saved_choices(["algo=ppo", f"resume={run}"]) == [
        "env.id=CartPole-v1", "~tuned", "algo=ppo", f"resume={run}"]
    assert with_saved_choices(["resume=auto", "algo=dqn"]) == ["resume=auto", "algo=dqn"]
    assert with_saved_choices(["algo=dqn"]) == ["algo=dqn"]


def test_with_saved_choices_never_carries_code_and_keeps_overrides_together(tmp_path):
    """A recorded `env.id=mymod:make` carried into the command line counted as named by the
    user, so a resume imported the run's code unasked; choices put before `-m` split Hydra's
    overrides ("unrecognized arguments")."""
    from rltrain.run_folder.argv import with_overrides
    from rltrain.run_folder.find import with_saved_choices

    hydra = tmp_path / "run" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "overrides.yaml").write_text(  # env= too: the id overrode it, so neither is carried
        "- algo=ppo\n- env=CartPole-v1\n- env.id=mymod:make\n- ~tuned\n")
    run = str(tmp_path / "run")
    assert with_saved_choices(["-m", f"resume={run}"]) == ["-m", "algo=ppo", "~tuned",
                                                           f"resume={run}"]
    assert with_saved_choices([f"resume={run}", "--cfg", "job"]) == [
        "algo=ppo", "~tuned", f"resume={run}", "--cfg", "job"]
    assert with_overrides(["resume=x", "-m"], ["hydra.run.dir=y"]) == ["resume=x",
                                                                        "hydra.run.dir=y", "-m"]
    assert with_overrides(["-m"], ["a=1"]) == ["-m", "a=1"]


def test_a_resume_of_code_named_in_the_run_still_needs_it_named(tmp_path, monkeypatch, capfd):
    from tests.e2e.harness import assert_refused, run_cli

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "envs"))
    tiny = ["total_timesteps=128", "algo.n_steps=16", "algo.batch_size=16", "eval.episodes=1",
            "logger=none", "progress=off"]
    made = run_cli(["algo=ppo", "env.id=dict_envs:CueTask", "env.num_envs=1", *tiny,
                    "hydra.run.dir=coded"], tmp_path, monkeypatch, capfd)
    assert made.rc == 0, made.describe()
    (tmp_path / "coded" / "checkpoints" / "final.pt").unlink()
    assert_refused(run_cli(["resume=coded", "total_timesteps=256"], tmp_path, monkeypatch, capfd),
                   2, "names code to run (env.id=dict_envs:CueTask)")
    with pytest.raises(UserError, match="names code to run"):
        train(["resume=" + str(tmp_path / "coded"), "total_timesteps=256"])


def test_a_resume_from_python_checks_against_the_runs_own_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train(["algo=ppo", "env=cartpole", "total_timesteps=256", "algo.n_steps=16",
           "algo.batch_size=64", "eval.episodes=1", "logger=none", "progress=off"], run_dir="p")
    with pytest.raises(UserError, match=r"would change the experiment \(env.num_envs: 8 -> 4\)"):
        train(["resume=p", "total_timesteps=512", "env.num_envs=4"])


def test_a_resume_without_the_runs_record_checks_algo_fields_against_its_checkpoint(
        tmp_path, monkeypatch, capfd):
    """A folder copied without `.hydra/`: `algo.lr_decay_steps` (the refusal's own hint) was an
    "unknown field" of the default PPO."""
    from tests.e2e.harness import run_cli

    monkeypatch.chdir(tmp_path)
    train(["algo=dqn", "env=cartpole", "total_timesteps=200", "algo.learning_starts=100",
           "algo.hidden_sizes=[8]", "eval.episodes=1", "logger=none", "progress=off"],
          run_dir="d")
    (tmp_path / "d" / "checkpoints" / "final.pt").unlink()
    import shutil

    shutil.rmtree(tmp_path / "d" / ".hydra")
    result = run_cli(["resume=d", "total_timesteps=300", "algo.lr_decay_steps=300"], tmp_path,
                     monkeypatch, capfd)
    assert result.rc == 0, result.describe()


def test_a_torchrun_resume_checks_against_the_runs_own_preset(tmp_path, monkeypatch, capfd):
    """Under torchrun the resume was validated as a new run (the default env's preset) before
    the ranks connect; the refusal comes before any process group is joined."""
    from tests.e2e.harness import assert_refused, run_cli

    monkeypatch.chdir(tmp_path)
    train(["algo=ppo", "env=cartpole", "total_timesteps=256", "algo.n_steps=16",
           "algo.batch_size=64", "eval.episodes=1", "logger=none", "progress=off"], run_dir="p")
    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert_refused(run_cli(["resume=p", "total_timesteps=512", "env.num_envs=4"], tmp_path,
                           monkeypatch, capfd), 2, "(env.num_envs: 8 -> 4)")


def test_a_command_run_in_this_process_leaves_no_log_handler_into_its_run_folder(
        tmp_path, monkeypatch, capfd):
    """Hydra's job logging adds a `train.log` handler to the root logger and left it there:
    in a process that goes on after `rltrain`'s `main()` (a notebook, this test suite) the next
    run's lines went into the last run's `train.log`, and the next run failed
    (FileNotFoundError) once that folder had been deleted."""
    import shutil

    from tests.e2e.harness import run_cli

    level = logging.getLogger().level
    first = tmp_path / "first"
    done = run_cli([*TINY, f"hydra.run.dir={first}"], tmp_path, monkeypatch, capfd)
    assert done.rc == 0, done.describe()
    assert "done: 64 env steps" in (first / "train.log").read_text()
    into_first = [h for h in logging.getLogger().handlers
                  if str(first) in str(getattr(h, "baseFilename", ""))]
    assert not into_first and logging.getLogger().level == level
    shutil.rmtree(first)
    train(TINY, run_dir=tmp_path / "second")  # raised FileNotFoundError from the old handler
    assert not first.exists()
    assert "done: 64 env steps" in (tmp_path / "second" / "train.log").read_text()
