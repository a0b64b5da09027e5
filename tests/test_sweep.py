"""rltrain.sweep: missing-plugin messages, thread shares, the Optuna study resume, seed records."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from rltrain import cli
from rltrain.errors import UserError
from rltrain.sweep import plugins
from rltrain.sweep import study as sweep_study
from rltrain.sweep import trial as sweep_trial


@pytest.mark.parametrize("arg, install", [
    ("hydra/launcher=joblib", '"rltrain[sweep]"'), ("hydra/sweeper=optuna", '"rltrain[sweep]"'),
    ("+hpo=ppo", '"rltrain[sweep]"'), ("hydra/launcher=submitit_slurm", '"rltrain[slurm]"'),
    ("hydra/launcher=submitit_local", '"rltrain[slurm]"'), ("hydra/launcher=ray", '"rltrain[ray]"'),
    ("hydra/sweeper=nevergrad", "hydra-nevergrad-sweeper"),
])
def test_a_missing_plugin_names_what_to_install(monkeypatch, arg, install):
    monkeypatch.setattr(plugins, "_installed", lambda module: False)
    with pytest.raises(UserError) as err:
        plugins.check_plugins(["-m", arg, "seed=0,1"])
    assert str(err.value).startswith(arg.lstrip("+") + " needs the Hydra plugin ")
    assert str(err.value).endswith(f"pip install {install}") and "\n" not in str(err.value)


def test_submitit_slurm_away_from_a_cluster_is_one_line(monkeypatch):
    monkeypatch.setattr(plugins, "_installed", lambda module: True)
    monkeypatch.setattr(plugins.shutil, "which", lambda name: None)
    with pytest.raises(UserError, match="srun is not on this machine"):
        plugins.check_plugins(["-m", "hydra/launcher=submitit_slurm"])


def test_plugins_are_only_checked_when_chosen(monkeypatch):
    monkeypatch.setattr(plugins, "_installed", lambda module: False)
    plugins.check_plugins(["-m", "seed=0,1", "algo=ppo", "hydra.launcher.n_jobs=2"])


def test_the_ray_launcher_missing_is_one_line_and_exit_code_2(monkeypatch, capsys):
    if plugins._installed("hydra_plugins.hydra_ray_launcher"):
        monkeypatch.setattr(plugins, "_installed", lambda module: False)
    monkeypatch.setattr(sys, "argv", ["rltrain", "-m", "hydra/launcher=ray", "seed=0,1"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == ('rltrain: error: hydra/launcher=ray needs the Hydra plugin '
                   'hydra-ray-launcher: pip install "rltrain[ray]"')


def test_sqlalchemy_2_is_refused_for_the_study_storage(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(plugins, "_installed", lambda module: True)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.0.30")
    with pytest.raises(UserError, match="sqlalchemy<2"):
        plugins.check_plugins(["+hpo=ppo"])


@pytest.mark.parametrize("launcher, cpus, threads", [
    ({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
      "n_jobs": 2}, 16, 8),
    ({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
      "n_jobs": -1}, 16, 1),
    ({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
      "cpus_per_task": 4}, 16, 4),
    ({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}, 16, 0),
])
def test_parallel_jobs_share_the_cores(launcher, cpus, threads):
    assert sweep_trial.launcher_threads(launcher, cpus) == threads


def test_trial_folder_suggests_the_trial_number_as_the_job_folder():
    calls = []

    class Trial:
        number = 7

        def suggest_int(self, name, low, high):
            calls.append((name, low, high))

    sweep_study.trial_folder(OmegaConf.create({}), Trial())
    assert calls == [("hydra.sweep.subdir", 7, 7)]


def test_resume_study_runs_only_the_missing_trials(tmp_path):
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{tmp_path}/sweep/optuna.db"
    config = OmegaConf.create({"hydra": {"sweeper": {
        "storage": storage, "study_name": "s", "n_trials": 5, "sampler": {"seed": 0}}}})
    sweep_study.ResumeStudy().on_multirun_start(config)  # a new study: only the folder is made
    assert (tmp_path / "sweep").is_dir() and config.hydra.sweeper.n_trials == 5
    sweep_study.ResumeStudy().on_multirun_end(config)
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    study.ask()  # a trial left running by an interrupted invocation
    sweep_study.ResumeStudy().on_multirun_start(config)
    sweep_study.ResumeStudy().on_multirun_end(config)
    assert config.hydra.sweeper.n_trials == 3  # 5 in all, 2 completed
    assert config.hydra.sweeper.sampler.seed == 3  # not the seed that drew the first trials
    stored = optuna.load_study(study_name="s", storage=storage).get_trials()
    assert [t.state.name for t in stored] == ["COMPLETE", "COMPLETE", "FAIL"]  # the cut-short one


def test_seed_record_gives_each_seed_folder_its_own_config_and_overrides(tmp_path):
    hydra = tmp_path / "job" / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "seeds_per_trial": 3}))
    (hydra / "overrides.yaml").write_text(yaml.safe_dump(["algo.lr=0.1", "seeds_per_trial=3",
                                                          "num_seeds=4"]))
    (hydra / "hydra.yaml").write_text("hydra: {}\n")
    sweep_trial.write_seed_record(tmp_path / "job", tmp_path / "job" / "seed_2", 2)
    dst = tmp_path / "job" / "seed_2" / ".hydra"
    assert yaml.safe_load((dst / "config.yaml").read_text()) == {
        "seed": 2, "seeds_per_trial": 1, "num_seeds": 1}  # a seed's folder is one run
    assert yaml.safe_load((dst / "overrides.yaml").read_text()) == ["algo.lr=0.1", "seed=2"]
    assert (dst / "hydra.yaml").is_file()


def test_trial_seeds_follow_the_base_seed(tiny_cfg):
    assert sweep_trial.trial_seeds(tiny_cfg(seed=5, seeds_per_trial=3)) == [5, 6, 7]
    with pytest.raises(UserError, match="seeds_per_trial=0"):
        sweep_trial.trial_seeds(tiny_cfg(seeds_per_trial=0))


@pytest.mark.parametrize("argv", [["-m", "seed=0,1"], ["+hpo=ppo"], ["hpo=sac"],
                                  ["hydra.mode=MULTIRUN", "seed=0,1"]])
def test_a_multirun_or_search_claims_no_single_run_folder(argv, tmp_path, monkeypatch):
    """A search (`+hpo=`) is a multirun without `-m`: it once left an empty
    outputs/<date>/<time>/ in the working folder."""
    from rltrain.run_folder.claim import single_run_dir

    monkeypatch.chdir(tmp_path)
    assert single_run_dir(argv) is None and list(tmp_path.iterdir()) == []
    assert single_run_dir(["seed=0"]).parent.parent == Path("outputs")  # a single run claims one
