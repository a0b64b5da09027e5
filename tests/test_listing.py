"""`rltrain list`: the algorithms, env aliases, tuned presets and extras, without torch."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

from rltrain.config.catalog import ALGORITHMS, EXTRAS, algo_options, missing_modules, presets
from rltrain.config.registry import ALGOS
from rltrain.envs.aliases import ENV_ALIASES
from tests.e2e.harness import run_cli


def test_traits_and_options_match_the_registry():
    assert ALGOS is ALGORITHMS  # one table: what `rltrain list` shows is what runs build
    assert {k: e.family for k, e in ALGORITHMS.items()} == {
        "ppo": "on_policy", "a2c": "on_policy", "dqn": "off_policy", "ddpg": "off_policy",
        "td3": "off_policy", "sac": "off_policy", "qrdqn": "off_policy", "tqc": "off_policy",
        "pqn": "on_policy", "trpo": "on_policy", "crossq": "off_policy",
        "ars": "on_policy"}
    options = {o.option: o.algo for o in algo_options()}
    assert set(ALGOS) <= set(options)  # every algorithm has its own option
    assert set(options.values()) <= set(ALGOS)  # and every option builds one of them
    assert options["ppo_lstm"] == "ppo"


def test_every_tuned_preset_file_is_listed_under_its_env():
    files = {p.name[: -len(".yaml")] for p in resources.files("rltrain.conf").joinpath("tuned")
             .iterdir() if p.name.endswith(".yaml")}
    listed = {f"{algo}_{env}" for env, algos in presets().items() for algo in algos}
    assert listed == files
    assert "ppo_lstm" in presets()["pendulum_novel"] and "dqn" in presets()["atari"]


def test_every_env_option_is_listed(tmp_path, monkeypatch, capfd):
    """An alias (`envs/aliases.py`) or a YAML of conf/env (`pixel_cartpole`): each is a row."""
    from rltrain.envs.aliases import ENV_ALIASES

    yamls = {p.name[: -len(".yaml")] for p in resources.files("rltrain.conf").joinpath("env")
             .iterdir() if p.name.endswith(".yaml")}
    monkeypatch.setenv("COLUMNS", "200")
    result = run_cli(["list"], tmp_path, monkeypatch, capfd)
    names = {cells[2].strip() for line in result.out.splitlines()
             if len(cells := line.split("│")) > 3 and cells[1].strip() == "env"}
    assert "pixel_cartpole" in yamls and yamls | set(ENV_ALIASES) <= names


def test_list_prints_algos_envs_presets_and_extras(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("COLUMNS", "200")
    result = run_cli(["list"], tmp_path, monkeypatch, capfd)
    assert result.rc == 0, result.describe()
    rows = [line for line in result.out.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in row.strip("│").split("│")] for row in rows]
    by_name = {c[1]: c for c in cells if c[1]}
    for option in algo_options():
        assert by_name[option.option][0] == "algo"
    assert "actions: Discrete" in by_name["dqn"][2] and "Box" not in by_name["dqn"][2]
    for alias, env_id in ENV_ALIASES.items():
        assert env_id in by_name[alias][2]
    assert "tuned: a2c, dqn, ppo" in by_name["breakout"][2]  # Atari presets fit every game
    assert "tuned: crossq, ppo, sac, td3" in by_name["halfcheetah"][2] and "extra mujoco" in by_name["halfcheetah"][2]
    for extra in EXTRAS:
        assert ("installed" if not missing_modules(extra) else "missing") in by_name[extra][2]
    assert run_cli(["--list"], tmp_path, monkeypatch, capfd).out == result.out


def test_list_imports_neither_torch_nor_hydra():
    code = ("import sys; from rltrain.cli import main; sys.argv = ['rltrain', 'list']; main(); "
            "heavy = [m for m in ('torch', 'hydra', 'gymnasium') if m in sys.modules]; "
            "assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ppo_lstm" in proc.stdout
