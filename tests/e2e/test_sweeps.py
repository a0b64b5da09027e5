"""Sweeps end to end: a 2x2 multirun, an Optuna search and its resume, joblib and submitit_local
launchers, then `rltrain report` over all of them.

Each command pays Python + torch start-up, so the independent ones run concurrently in one
module-scoped fixture with tiny budgets (smoke mode: 512 env steps a run); the tests check
what they left on disk. Commands whose plugin is not installed are skipped, not failed; `make
test` installs the `sweep` and `slurm` extras so that they run.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from rltrain.report.cli import write_report
from tests.test_report import png_size

_SCRIPT = Path(sys.executable).with_name("rltrain")
RLTRAIN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "rltrain.cli"]
TINY = ["debug=smoke", "env=CartPole-v1", "progress=off"]  # 512 env steps, evals at 256 and 512
PLUGINS = {"optuna": "hydra_plugins.hydra_optuna_sweeper",
           "joblib": "hydra_plugins.hydra_joblib_launcher",
           "submitit": "hydra_plugins.hydra_submitit_launcher"}


def rltrain(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the installed `rltrain` command (headless, tracebacks off)."""
    env = {k: v for k, v in os.environ.items() if k != "RLTRAIN_DEBUG"}
    env["SDL_VIDEODRIVER"] = "dummy"
    return subprocess.run([*RLTRAIN, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"rc={proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def installed(name: str) -> bool:
    return importlib.util.find_spec(PLUGINS[name]) is not None


def hpo_args(folder: Path, n_trials: int) -> list[str]:
    return ["+hpo=ppo", *TINY, "seeds_per_trial=2", f"hydra.sweeper.n_trials={n_trials}",
            f"hydra.sweep.dir={folder}"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> dict:
    """Run every sweep of this module; the Optuna search is resumed once it has finished."""
    tmp = tmp_path_factory.mktemp("sweeps")
    jobs = {"grid": ["-m", "algo=ppo,a2c", "seed=0,1", *TINY, f"hydra.sweep.dir={tmp / 'grid'}"]}
    if installed("joblib"):
        jobs["joblib"] = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "seed=0,1",
                          "torch_threads=0", *TINY, f"hydra.sweep.dir={tmp / 'joblib'}"]
    if installed("submitit"):
        jobs["submitit"] = ["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5",
                            "hydra.launcher.cpus_per_task=1", "seed=0,1", *TINY,
                            f"hydra.sweep.dir={tmp / 'submitit'}"]

    def search_then_resume() -> dict:
        first = rltrain(hpo_args(tmp / "hpo", 3), tmp)
        stamp = (tmp / "hpo" / "0" / "seeds.json").stat().st_mtime_ns if first.returncode == 0 else 0
        return {"hpo": first, "hpo_stamp": stamp,
                "hpo_resume": rltrain(hpo_args(tmp / "hpo", 4), tmp)}

    with ThreadPoolExecutor(max_workers=4) as pool:  # the longest chain starts first
        chain = pool.submit(search_then_resume) if installed("optuna") else None
        futures = {name: pool.submit(rltrain, args, tmp) for name, args in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
        results |= chain.result() if chain else {}
    return {"tmp": tmp, **results}


def assert_complete_run(run: Path) -> None:
    for name in (".hydra/overrides.yaml", ".hydra/config.yaml", "metrics.csv", "train.log",
                 "checkpoints/final.pt", "learning_curve.png"):
        assert (run / name).is_file(), f"{run / name} missing"
    assert ",eval/mean_reward," in (run / "metrics.csv").read_text()


def test_a_2x2_multirun_makes_four_complete_runs_and_a_summary(sweeps):
    proc, folder = sweeps["grid"], sweeps["tmp"] / "grid"
    assert proc.returncode == 0, describe(proc)
    seen = set()
    for num in range(4):
        assert_complete_run(folder / str(num))
        overrides = yaml.safe_load((folder / str(num) / ".hydra" / "overrides.yaml").read_text())
        seen.add((next(o for o in overrides if o.startswith("algo=")),
                  next(o for o in overrides if o.startswith("seed="))))
    assert seen == {(a, s) for a in ("algo=ppo", "algo=a2c") for s in ("seed=0", "seed=1")}
    summary = yaml.safe_load((folder / "multirun.yaml").read_text())
    assert summary["hydra"]["overrides"]["task"][:2] == ["algo=ppo,a2c", "seed=0,1"]


def test_an_optuna_search_stores_its_study_and_returns_the_mean_over_seeds(sweeps):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    proc, folder = sweeps["hpo"], sweeps["tmp"] / "hpo"
    assert proc.returncode == 0, describe(proc)
    assert (folder / "optuna.db").is_file()
    means = []
    for trial in range(3):
        for seed in (0, 1):
            assert_complete_run(folder / str(trial) / f"seed_{seed}")
        means.append(json.loads((folder / str(trial) / "seeds.json").read_text())["mean_reward"])
    results = yaml.safe_load((folder / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(max(means))  # maximised: the job's return
    assert "algo.lr" in results["best_params"]
    assert (folder / "report.csv").is_file() and (folder / "learning_curves.png").is_file()


def test_a_second_invocation_resumes_the_study(sweeps):
    optuna = pytest.importorskip("optuna")
    proc, folder = sweeps["hpo_resume"], sweeps["tmp"] / "hpo"
    assert sweeps["hpo"].returncode == 0, describe(sweeps["hpo"])
    assert proc.returncode == 0, describe(proc)
    assert "3 of 4 trials completed, 1 to go" in proc.stdout + proc.stderr
    assert_complete_run(folder / "3" / "seed_0")  # numbered after the first three trials
    assert not (folder / "4").exists()
    assert (folder / "0" / "seeds.json").stat().st_mtime_ns == sweeps["hpo_stamp"]  # untouched
    study = optuna.load_study(study_name="ppo_CartPole-v1", storage=f"sqlite:///{folder}/optuna.db")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4


def test_joblib_runs_two_jobs_in_parallel_with_one_torch_thread_each(sweeps):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    proc, folder = sweeps["joblib"], sweeps["tmp"] / "joblib"
    assert proc.returncode == 0, describe(proc)
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    for num in range(2):
        assert_complete_run(folder / str(num))
        assert "torch threads: 1" in (folder / str(num) / "train.log").read_text()


def test_submitit_local_runs_two_jobs(sweeps):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    proc, folder = sweeps["submitit"], sweeps["tmp"] / "submitit"
    assert proc.returncode == 0, describe(proc)
    for num in range(2):
        assert_complete_run(folder / str(num))
    assert (folder / ".submitit").is_dir()


def test_report_over_every_sweep_writes_table_csv_and_png(sweeps, capsys):
    assert sweeps["grid"].returncode == 0, describe(sweeps["grid"])
    groups = write_report(sweeps["tmp"])
    assert "IQM [95% CI]" in capsys.readouterr().out
    with open(sweeps["tmp"] / "report.csv", newline="") as f:
        rows = {r["group"]: r for r in csv.DictReader(f)}
    grid = {g: r for g, r in rows.items() if g.startswith("algo=")}
    assert set(grid) == {f"algo={a} debug=smoke env=CartPole-v1" for a in ("ppo", "a2c")}
    assert all(r["runs"] == "2" and r["seeds"] in ("0;1", "1;0") for r in grid.values())
    expected = 2 + (4 if "hpo_resume" in sweeps else 0) + ("joblib" in sweeps) \
        + ("submitit" in sweeps)
    assert len(rows) == len(groups) == expected
    width, height = png_size(sweeps["tmp"] / "learning_curves.png")
    assert width >= 400 and height >= 300
    assert (sweeps["tmp"] / "learning_curves.png").stat().st_size > 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, body: dict | None = None):
    """GET (or POST `body` as JSON to) TensorBoard's HTTP data API; the decoded JSON."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"X-XSRF-Protected": "1", "Content-Type": "application/json"}  # POST needs both
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def tensorboard(sweeps):
    """A real TensorBoard server on 127.0.0.1 over the finished 2x2 grid; yields its port."""
    binary = Path(sys.executable).with_name("tensorboard")
    if not binary.is_file():
        pytest.skip("the tensorboard binary is not installed beside this Python")
    assert sweeps["grid"].returncode == 0, describe(sweeps["grid"])
    port = _free_port()
    proc = subprocess.Popen([str(binary), "--logdir", str(sweeps["tmp"] / "grid"),
                             "--host", "127.0.0.1", "--port", str(port), "--load_fast=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:  # until it serves the four runs' scalars
            try:
                if len(_get(port, "/data/plugin/scalars/tags")) == 4:
                    break
            except (OSError, ValueError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"tensorboard did not serve 4 runs: {proc.stderr.read()[-2000:]}")
            time.sleep(0.5)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_tensorboard_serves_scalars_config_and_hparams_of_every_run(tensorboard):
    port = tensorboard
    runs = [f"{num}/tb" for num in range(4)]
    scalars = _get(port, "/data/plugin/scalars/tags")
    for run in runs:
        assert {"train/policy_loss", "eval/mean_reward", "final/eval_mean"} <= set(scalars[run])
    assert all("config/text_summary" in tags for tags in _get(port, "/data/plugin/text/tags").values())
    text = _get(port, "/data/plugin/text/text?run=0/tb&tag=config/text_summary")[0]
    assert text["step"] == 0 and "algo.lr" in text["text"] and "env.id" in text["text"]
    experiment = _get(port, "/data/plugin/hparams/experiment", {"experimentName": ""})
    differ = {h["name"] for h in experiment["hparamInfos"] if h.get("differs")}
    assert {"algo.name", "seed"} <= differ  # what the sweep changed stands out
    assert "logger.csv" not in {h["name"] for h in experiment["hparamInfos"]}
    groups = _get(port, "/data/plugin/hparams/session_groups", {
        "experimentName": "", "startIndex": 0, "sliceSize": 100,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [{"hparam": "algo.name"}, {"hparam": "seed"},
                      {"metric": {"tag": "final/eval_mean", "group": ""}}]})["sessionGroups"]
    sessions = {(g["hparams"]["algo.name"], g["hparams"]["seed"]): g for g in groups}
    assert set(sessions) == {(a, s) for a in ("ppo", "a2c") for s in (0.0, 1.0)}
    for group in groups:
        values = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert math.isfinite(values["final/eval_mean"]) and values["final/env_steps"] == 512


def test_an_optuna_search_ends_with_its_plots_and_the_best_trial_as_a_command(sweeps):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    from omegaconf import OmegaConf

    from rltrain.config.compose import compose_train_config
    from rltrain.config.schema import config_to_dict
    from rltrain.config.validation import to_train_config

    proc, folder = sweeps.get("hpo_resume") or sweeps["hpo"], sweeps["tmp"] / "hpo"
    assert proc.returncode == 0, describe(proc)
    for name in ("history", "importances", "parallel"):
        png = folder / f"optuna_{name}.png"
        assert png.is_file() and png.stat().st_size > 10_000, f"{png} missing or tiny"
        width, height = png_size(png)
        assert width >= 400 and height >= 300
    head, command = (folder / "best_trial.txt").read_text().strip().splitlines()
    trial = int(head.split(" is trial ")[1].split()[0])
    argv = shlex.split(command)
    assert argv[0] == "rltrain" and not any(a.startswith(("+hpo", "hydra.")) for a in argv)
    saved = OmegaConf.load(folder / str(trial) / ".hydra" / "config.yaml")
    assert config_to_dict(compose_train_config(argv[1:])) == config_to_dict(to_train_config(saved))
