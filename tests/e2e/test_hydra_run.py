"""A single run goes through Hydra's run without `hydra.main`'s mode probe (`cli/hydra_run.py`):
it composes the configuration twice (rltrain's check, Hydra's job) instead of three times, and
leaves the same run folder `hydra.main` leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rltrain.cli import hydra_run
from tests.e2e.harness import EXIT_USAGE, assert_refused, run_cli

TINY = ["env=CartPole-v1", "env.num_envs=2", "algo.n_steps=16", "algo.batch_size=32",
        "algo.n_epochs=1", "algo.hidden_sizes=[8]", "total_timesteps=64", "eval.episodes=1",
        "eval.num_envs=1", "logger=none", "progress=off"]


def train_counting(folder: Path, monkeypatch, capfd, via_main: bool) -> int:
    """Train TINY into `folder` in-process; how many times Hydra composed the configuration."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    calls = []
    compose = ConfigLoaderImpl.load_configuration

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("run_mode"))
        return compose(self, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    if via_main:
        monkeypatch.setattr(hydra_run, "is_single_run", lambda argv: False)
    result = run_cli([*TINY, f"hydra.run.dir={folder}"], folder.parent, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    monkeypatch.undo()
    return len(calls)


def recorded(folder: Path) -> dict:
    """What `.hydra/` holds, less what names the folder or the moment (they differ by design)."""
    hydra = yaml.safe_load((folder / ".hydra" / "hydra.yaml").read_text())["hydra"]
    hydra["run"].pop("dir")
    for key in ("output_dir", "cwd"):
        hydra["runtime"].pop(key)
    hydra["overrides"]["hydra"] = [o for o in hydra["overrides"]["hydra"]
                                   if not o.startswith("hydra.run.dir=")]
    return {"hydra": hydra,
            "config": yaml.safe_load((folder / ".hydra" / "config.yaml").read_text()),
            "overrides": yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text()),
            "logged": (folder / "train.log").is_file()}


def test_a_single_run_composes_twice_and_leaves_the_folder_hydra_main_leaves(
        tmp_path, monkeypatch, capfd):
    direct = train_counting(tmp_path / "direct", monkeypatch, capfd, via_main=False)
    main = train_counting(tmp_path / "main", monkeypatch, capfd, via_main=True)
    assert (direct, main) == (2, 3)  # hydra.main's extra one is its mode probe
    ours, theirs = recorded(tmp_path / "direct"), recorded(tmp_path / "main")
    assert ours == theirs
    assert ours["hydra"]["mode"] == "RUN" and ours["hydra"]["job"]["name"] == "train"
    assert ours["overrides"] == TINY and ours["logged"]


@pytest.mark.parametrize("argv, single", [
    (["algo=sac", "env=Pendulum-v1", "seed=3"], True),
    (["resume=outputs/2026-11-29/10-00-00", "total_timesteps=2e5"], True),
    (["~tuned", "env.id=Acrobot-v1"], True),
    ([], True),
    (["-m", "seed=0,1"], False),
    (["--multirun", "seed=0"], False),
    (["+hpo=ppo"], False),
    (["hydra.mode=MULTIRUN", "seed=0,1"], False),
    (["--cfg", "job"], False),
    (["--config-dir", "my_conf", "algo=ppo"], False),
    (["-cn", "other"], False),
])
def test_only_a_command_line_of_plain_overrides_skips_hydra_main(argv, single):
    assert hydra_run.is_single_run(argv) is single


def test_the_run_mode_is_added_once():
    assert hydra_run.run_overrides(["seed=1"]) == ["seed=1", "hydra.mode=RUN"]
    assert hydra_run.run_overrides(["hydra.mode=RUN", "seed=1"]) == ["hydra.mode=RUN", "seed=1"]


CALLS: list[str] = []
"""What `Probe` callbacks were told, in order (this process's)."""


class Probe:
    """A user's Hydra callback (`hydra.callbacks.<name>._target_`): records each hook."""

    def __init__(self, name: str, fail: bool = False):
        self.name, self.fail = name, fail

    def __getattr__(self, hook: str):
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def record(**kwargs) -> None:
            CALLS.append(f"{self.name}.{hook}")
            if self.fail:
                raise RuntimeError("probe failed")
        return record


def test_a_single_run_tells_the_configured_callbacks_as_hydra_does(tmp_path, monkeypatch, capfd):
    """Run and job hooks in Hydra's order (end hooks in reverse); a failing one only warns."""
    CALLS.clear()
    probes = [f"+hydra.callbacks.{name}._target_={__name__}.Probe" for name in ("a", "b")]
    names = ["+hydra.callbacks.a.name=a", "+hydra.callbacks.b.name=b",
             "+hydra.callbacks.b.fail=true"]
    with pytest.warns(UserWarning) as warned:
        result = run_cli([*TINY, *probes, *names, f"hydra.run.dir={tmp_path / 'run'}"],
                         tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    assert [str(w.message) for w in warned] == [
        f"Callback Probe.{hook} raised RuntimeError: probe failed"
        for hook in ("on_run_start", "on_job_start", "on_job_end", "on_run_end")]
    assert CALLS == ["a.on_run_start", "b.on_run_start", "a.on_job_start", "b.on_job_start",
                     "b.on_job_end", "a.on_job_end", "b.on_run_end", "a.on_run_end"]
    assert (tmp_path / "run" / "checkpoints" / "final.pt").is_file()


def test_a_hydra_override_hydra_refuses_is_one_line_and_leaves_no_run_folder(
        tmp_path, monkeypatch, capfd):
    """rltrain's own check leaves `hydra.*` to Hydra: its refusal still ends in one line."""
    result = run_cli([*TINY, "hydra/job_logging=nope"], tmp_path, monkeypatch, capfd)
    assert_refused(result, EXIT_USAGE, "unknown hydra/job_logging 'nope'")
    assert not (tmp_path / "outputs").exists()
