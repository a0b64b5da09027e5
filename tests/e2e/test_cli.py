"""The `rltrain` command end to end, in subprocesses: train, eval, help, and one-line errors.

Every command pays Python + torch start-up (3 s of CPU), so the independent commands of this
module run once, concurrently, in a module-scoped fixture; the tests then check their results.
All bad inputs also go through `rltrain.cli.main` in-process (same code path, no start-up cost);
one training and one eval mistake also run as subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rltrain.checkpoint import format as checkpoint
from tests.conftest import preset_values

_SCRIPT = Path(sys.executable).with_name("rltrain")
RLTRAIN = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "rltrain.cli"]
TRAIN_ARGS = ["debug=smoke", "env=CartPole-v1", "env.num_envs=2", "algo.n_steps=64",
              "algo.batch_size=64",
              "progress=plain"]

# name -> (arguments, a fragment the error line must contain); {tmp} is the module's folder
BAD_INPUTS = {
    "unknown_algo": (["algo=dqnn"], "unknown algo 'dqnn'"),
    "unknown_env": (["env=Pendulm-v1"], "unknown env 'Pendulm-v1'"),
    "typo_field": (["algo.lrr=1"], "algo.lrr"),
    "wrong_type": (["algo.lr=abc"], "algo.lr=abc"),
    "zero_timesteps": (["total_timesteps=0"], "total_timesteps=0"),
    "zero_envs": (["env.num_envs=0"], "env.num_envs=0"),
    "bad_batch_size": (["env=CartPole-v1", "algo.batch_size=100"], "algo.batch_size=100"),
    "bad_activation": (["net.activation=sigmoid"],
                       "net.activation='sigmoid': choose one of tanh, relu, elu, gelu, silu"),
    "empty_net_hidden": (["net.hidden=[]"], "net.hidden=[]: give one or more layer widths > 0"),
    "typo_net_field": (["net.layer_norms=true"], "did you mean algo.net.layer_norm"),
    "eval_missing_checkpoint": (["eval", "ckpt={tmp}/missing.pt"], "does not exist"),
    "eval_random_bytes": (["eval", "ckpt={tmp}/random.pt"], "not a readable rltrain checkpoint"),
}
SUBPROCESS_BAD_INPUTS = ("typo_field", "eval_random_bytes")


def bad_input_args(name: str, tmp: Path) -> list[str]:
    """The arguments of a BAD_INPUTS case; training cases get a run dir that must stay absent."""
    args = [a.format(tmp=tmp) for a in BAD_INPUTS[name][0]]
    return args if args[0] == "eval" else [*args, f"hydra.run.dir={tmp / name}"]


def make_random_checkpoint(tmp: Path) -> None:
    (tmp / "random.pt").write_bytes(np.random.default_rng(0).bytes(2048))


def rltrain(args: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the installed `rltrain` command (headless, tracebacks off)."""
    env = {k: v for k, v in os.environ.items() if k != "RLTRAIN_DEBUG"}
    env["SDL_VIDEODRIVER"] = "dummy"
    return subprocess.run([*RLTRAIN, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> dict:
    """Run every command of this module: independent ones concurrently, then eval of the run."""
    tmp = tmp_path_factory.mktemp("cli")
    run_dir, elsewhere = tmp / "run", tmp / "elsewhere"
    elsewhere.mkdir()
    make_random_checkpoint(tmp)

    def train_then_eval() -> dict:
        out = {"train": rltrain([*TRAIN_ARGS, f"hydra.run.dir={run_dir}"], tmp)}
        if out["train"].returncode == 0:
            out["eval"] = rltrain(["eval", f"ckpt={run_dir}", "episodes=3"], cwd=elsewhere)
        return out

    jobs = {"help": ["--help"], "cfg": ["--cfg", "job", "env=pendulum"],
            **{name: bad_input_args(name, tmp) for name in SUBPROCESS_BAD_INPUTS}}
    with ThreadPoolExecutor(max_workers=3) as pool:  # the longest chain starts first
        chain = pool.submit(train_then_eval)
        futures = {name: pool.submit(rltrain, args, tmp) for name, args in jobs.items()}
        results = {name: f.result() for name, f in futures.items()} | chain.result()
    return {"tmp": tmp, "run_dir": run_dir, "elsewhere": elsewhere, **results}


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"rc={proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def test_training_run_exits_zero_and_fills_the_run_directory(cli):
    proc, run = cli["train"], cli["run_dir"]
    assert proc.returncode == 0, describe(proc)
    assert "applied tuned preset conf/tuned/ppo_cartpole.yaml" in proc.stdout + proc.stderr
    for name in ("config.yaml", "overrides.yaml", "hydra.yaml"):
        assert (run / ".hydra" / name).is_file(), name
    composed = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    assert composed["env"]["id"] == "CartPole-v1" and composed["algo"]["n_steps"] == 64
    for name in ("latest.pt", "best.pt", "final.pt"):
        assert (run / "checkpoints" / name).is_file(), name
    assert "training ppo on CartPole-v1" in (run / "train.log").read_text()
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0] == "step,time,name,value"
    assert any(",train/policy_loss," in r for r in rows)


def test_training_run_writes_tensorboard_scalars(cli):
    assert cli["train"].returncode == 0, describe(cli["train"])
    acc = EventAccumulator(str(cli["run_dir"] / "tb"), size_guidance={"scalars": 0}).Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("train/policy_loss", "episode/mean_reward", "eval/mean_reward", "time/sps"):
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    evals = acc.Scalars("eval/mean_reward")
    assert [e.step for e in evals] == [256, 512]  # smoke: eval.freq=256, 512 steps
    assert all(e.value > 0 for e in evals)  # CartPole pays 1 per step


def test_latest_checkpoint_loads_with_the_resolved_config(cli):
    assert cli["train"].returncode == 0, describe(cli["train"])
    payload = checkpoint.load(cli["run_dir"] / "checkpoints" / "latest.pt")
    assert payload["config"]["env"]["id"] == "CartPole-v1"
    assert payload["config"]["preset"] == "ppo_cartpole"
    assert payload["counters"]["global_step"] == 512


def test_eval_of_the_run_prints_a_table_and_writes_results_from_another_folder(cli):
    assert cli["train"].returncode == 0, describe(cli["train"])
    proc = cli["eval"]
    assert proc.returncode == 0, describe(proc)
    assert "mean return" in proc.stdout
    results = json.loads((cli["run_dir"] / "eval" / "results.json").read_text())
    assert results["episodes"] == 3 and len(results["returns"]) == 3
    assert results["mean_reward"] == pytest.approx(sum(results["returns"]) / 3)
    assert (results["algo"], results["env"]) == ("ppo", "CartPole-v1")
    assert list(cli["elsewhere"].iterdir()) == []  # eval needs no conf/ and leaves cwd alone


def assert_one_error_line(rc: int, stdout: str, stderr: str, fragment: str) -> None:
    assert rc == 2, f"rc={rc}\n{stdout[-2000:]}\n{stderr[-2000:]}"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("rltrain: error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize("name", SUBPROCESS_BAD_INPUTS)
def test_bad_input_command_exits_2_with_one_error_line_and_no_traceback(cli, name):
    proc = cli[name]
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, BAD_INPUTS[name][1])
    assert not (cli["tmp"] / name).exists()  # nothing started: no run directory


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_exits_2_with_one_error_line_naming_the_problem(name, tmp_path, monkeypatch,
                                                                  capfd):
    from rltrain.cli import main

    make_random_checkpoint(tmp_path)
    monkeypatch.delenv("RLTRAIN_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["rltrain", *bad_input_args(name, tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capfd.readouterr()
    assert_one_error_line(exit_info.value.code, out, err, BAD_INPUTS[name][1])
    assert not (tmp_path / name).exists()


def test_help_exits_zero_and_lists_the_config_groups(cli):
    proc = cli["help"]
    assert proc.returncode == 0, describe(proc)
    assert "rltrain" in proc.stdout
    lines = proc.stdout.splitlines()
    algo_line = next(line for line in lines if line.startswith("algo: "))
    assert "ppo" in algo_line
    assert any(line.startswith("env: ") and "CartPole-v1" in line for line in lines)


def test_cfg_job_prints_the_composed_config_without_training(cli):
    proc = cli["cfg"]
    assert proc.returncode == 0, describe(proc)
    printed = yaml.safe_load(proc.stdout)
    assert printed["env"]["id"] == "Pendulum-v1" and printed["preset"] == "ppo_pendulum"
    assert printed["algo"]["gamma"] == preset_values("ppo_pendulum")["algo.gamma"]
    assert "training" not in proc.stdout + proc.stderr


def test_rltrain_debug_env_var_raises_the_original_error(monkeypatch):
    from rltrain.cli import main
    from rltrain.errors import UserError

    monkeypatch.setenv("RLTRAIN_DEBUG", "1")
    monkeypatch.setattr(sys, "argv", ["rltrain", "algo.lrr=1"])
    with pytest.raises(UserError, match="algo.lrr"):
        main()
