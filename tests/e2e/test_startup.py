"""Start-up (issue 16): `rltrain --help` and a refused command line never import torch, and a
training run never imports torch._dynamo.

Each command runs in a fresh interpreter (`START`: `rltrain.cli.main` with the command's
arguments), which writes the heavy modules it holds when it exits: an import of torch anywhere on
these paths, at the top of a module or inside a function, fails the test. No time is asserted
(`benchmarks/startup.py` measures it). `--help` is also compared with the text Hydra writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import EXIT_USAGE

# torch._dynamo: torch.optim imports it on first use (1.1 s here); rltrain's Adam does not.
# ale_py: most of a second, for ALE ids only (the check for legacy Atari ids reads file names)
HEAVY = ("torch", "torch._dynamo", "tensorboard", "matplotlib", "ale_py")

START = f"""
import atexit, sys

def report():
    loaded = [m for m in {HEAVY!r} if m in sys.modules]
    print("heavy modules at exit: " + (", ".join(loaded) or "none"), file=sys.stderr)

atexit.register(report)
sys.argv = ["rltrain", *sys.argv[1:]]
from rltrain.cli import main
main()
"""
NONE_LOADED = "heavy modules at exit: none"


def run_fresh(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`rltrain <argv>` in a new interpreter in `cwd` (the exit report last on stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "RLTRAIN_DEBUG"}
    return subprocess.run([sys.executable, "-c", START, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_exit_report_names_torch_when_it_was_imported(tmp_path):
    # the probe itself: a command that trains does import torch, and the report says so; its
    # update, checkpoint and final eval never pull in torch._dynamo (the import torch.optim makes);
    # MountainCar-v0 looks like a legacy Atari id (<Name>-v0) and needs no ale_py either
    done = run_fresh(["env=MountainCar-v0", "total_timesteps=16", "env.num_envs=2", "algo.n_steps=8",
                      "algo.batch_size=16", "eval.freq=0", "eval.episodes=1", "logger=none",
                      "progress=off", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert done.returncode == 0, done.stderr
    report = done.stderr.splitlines()[-1]
    assert report.startswith("heavy modules at exit: torch"), report
    assert "torch._dynamo" not in report and "ale_py" not in report
    assert (tmp_path / "run" / "checkpoints").is_dir()


@pytest.mark.parametrize("argv", [["--help"], ["algo=sac", "env=CartPole-v1", "-h"]])
def test_help_imports_no_torch(argv, tmp_path):
    done = run_fresh(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "== Configuration groups ==" in done.stdout and "\nalgo:\n" in done.stdout
    assert done.stderr.splitlines() == [NONE_LOADED]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("argv", "error"), [
    (["algo=nosuch"], "unknown algo 'nosuch': choose one of a2c,"),
    (["algo.lr=-1"], "algo.lr=-1.0 must be a finite number > 0"),
    (["total_timesteps=abc"], "total_timesteps=abc: expected float, got str"),
    (["env=CartPole-v1", "+env.kwargs.nosuch=1"], "env.kwargs.nosuch: CartPole-v1 takes"),
])
def test_a_refused_command_line_is_one_line_and_imports_no_torch(argv, error, tmp_path):
    done = run_fresh(argv, tmp_path)
    assert done.returncode == EXIT_USAGE, done.stderr
    first, *rest = done.stderr.splitlines()
    assert first.startswith(f"rltrain: error: {error}"), first
    assert rest == [NONE_LOADED]
    assert not list(tmp_path.iterdir())  # refused before Hydra made a run folder


@pytest.mark.parametrize("argv", [[], ["algo=sac", "env=Acrobot-v1", "seed=3"],
                                  ["env=CartPole-v1", "logger=[tensorboard,wandb]"]])
def test_help_is_the_text_hydra_writes(argv, monkeypatch, capsys):
    from rltrain.cli import train as cli
    from rltrain.cli.help import app_help
    from rltrain.config.compose import normalize_overrides, register_options
    from rltrain.parallel.world import SOLO

    argv = normalize_overrides(argv)
    register_options(argv)
    ours = app_help([*argv, "--help"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli._train_task([*argv, "--help"], SOLO)  # Hydra's own --help (its listing takes seconds)
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"{ours}\n"


@pytest.mark.parametrize("argv", [["--cfg", "job"], ["--help", "--resolve"],
                                  ["hydra.help.header=hi", "--help"]])
def test_help_leaves_to_hydra_what_it_does_not_write_itself(argv):
    from rltrain.cli.help import app_help

    assert app_help(argv) is None


def test_with_a_display_importing_rltrain_leaves_sdl_alone(tmp_path):
    """rltrain set SDL_VIDEODRIVER=dummy (for headless machines) on import, everywhere: an
    application with a display lost its pygame windows (render_mode="human") once it imported
    rltrain. A fresh interpreter, since the setting is made at import."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SDL_VIDEODRIVER", "WAYLAND_DISPLAY", "RLTRAIN_DEBUG")}
    code = "import os, rltrain.envs.make; print(os.environ.get('SDL_VIDEODRIVER'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                          env={**env, "DISPLAY": ":0", "PYTHONPATH": str(Path(__file__).parents[2])},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None"
