"""Logger selection (`logger=`, the list form), metrics.csv always on, missing optional packages."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest
import torch

from rltrain.config.overrides import compose_checked
from rltrain.config.schema import LoggerConfig
from rltrain.config.validation import to_train_config
from rltrain.envs.normalize import NormalizeObs, ScaleReward
from rltrain.errors import UserError
from rltrain.loggers.backend import import_backend
from rltrain.loggers.base import build_loggers
from rltrain.loggers.norm_stats import MAX_DIMS, normalizer_metrics
from rltrain.types import EnvSpec


def composed_logger(*overrides: str) -> LoggerConfig:
    return to_train_config(compose_checked("config", list(overrides))).logger


def switches(cfg: LoggerConfig) -> tuple[bool, bool, bool, bool]:
    return cfg.tensorboard, cfg.csv, cfg.wandb.enabled, cfg.swanlab.enabled


@pytest.mark.parametrize(("overrides", "expected"), [
    ([], (True, True, False, False)),
    (["logger=wandb"], (False, True, True, False)),
    (["logger=swanlab"], (False, True, False, True)),
    (["logger=none"], (False, True, False, False)),
    (["logger=[tensorboard,wandb]"], (True, True, True, False)),
    (["logger=[wandb,tensorboard]"], (True, True, True, False)),
    (["logger=[tensorboard,wandb,swanlab]"], (True, True, True, True)),
    (["logger=none", "logger.csv=false"], (False, False, False, False)),
])
def test_each_logger_option_switches_only_its_own_backend(overrides, expected):
    assert switches(composed_logger(*overrides)) == expected


def test_list_form_keeps_the_fields_set_for_each_backend():
    cfg = composed_logger("logger=[tensorboard,wandb]", "logger.wandb.tags=[ppo,baseline]",
                          "logger.wandb.group=g1", "logger.extra_log_keys=[x_position]")
    assert (cfg.wandb.tags, cfg.wandb.group, cfg.wandb.mode) == (["ppo", "baseline"], "g1", None)
    assert cfg.extra_log_keys == ["x_position"] and cfg.swanlab.mode == "offline"


@pytest.mark.parametrize(("override", "fragment"), [
    ("logger.wandb.mode=onlin", "logger.wandb.mode='onlin'"),
    ("logger.swanlab.mode=cloudy", "logger.swanlab.mode='cloudy'"),
    ("logger.wandb.projekt=x", "projekt"),
])
def test_bad_logger_settings_are_one_line_errors(override, fragment):
    with pytest.raises(UserError) as exc:
        composed_logger(override)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("option", ["wandb", "swanlab"])
def test_missing_package_stops_before_anything_is_written(option, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, option, None)  # what `import wandb` sees when not installed
    cfg = LoggerConfig(tensorboard=True)
    getattr(cfg, option).enabled = True
    with pytest.raises(UserError) as exc:
        build_loggers(cfg, tmp_path / "run")
    assert str(exc.value) == f'logger={option} needs {option}: pip install "rltrain[{option}]"'
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match=rf"rltrain\[{option}\]"):
        import_backend(option)


def test_cli_with_a_missing_logger_package_exits_2_with_one_line_and_no_run_dir(
        tmp_path, monkeypatch, capfd):
    from rltrain.cli import main

    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.delenv("RLTRAIN_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["rltrain", "logger=[tensorboard,wandb]",
                                      f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    _, err = capfd.readouterr()
    assert exit_info.value.code == 2
    assert err.strip().splitlines() == [
        'rltrain: error: logger=wandb needs wandb: pip install "rltrain[wandb]"']
    assert not (tmp_path / "run").exists()


def test_csv_is_written_whatever_the_backends(tmp_path):
    loggers = build_loggers(LoggerConfig(), tmp_path)  # the schema default: CSV only
    loggers.log({"a/b": 1.5}, step=3)
    loggers.close()
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0] == "step,time,name,value" and lines[1].endswith(",a/b,1.5")
    assert lines[1].startswith("3,") and not (tmp_path / "tb").exists()


def fake_env(obs_dim: int) -> SimpleNamespace:
    return SimpleNamespace(spec=EnvSpec((obs_dim,), "box", 1, 2), device=torch.device("cpu"))


def test_norm_stats_name_every_dimension_and_the_reward_scale():
    obs = NormalizeObs(fake_env(3))
    obs.rms.update(torch.tensor([[1.0, 2.0, -4.0], [3.0, 2.0, 4.0]]))
    env = ScaleReward(obs, gamma=0.9)
    env.rms.update(torch.tensor([2.0, 4.0]))
    m = normalizer_metrics(env)
    # RunningMeanStd starts from a 1e-4 pseudo-count at mean 0, var 1: values are off by ~1e-2
    assert [m[f"norm/obs_mean/{i}"] for i in range(3)] == pytest.approx([2.0, 2.0, 0.0], abs=1e-3)
    assert [m[f"norm/obs_std/{i}"] for i in range(3)] == pytest.approx([1.0, 0.0, 4.0], abs=2e-2)
    assert m["norm/reward_std"] == pytest.approx(1.0, abs=1e-3)
    assert m["norm/obs_count"] == m["norm/reward_count"] == pytest.approx(2.0, abs=1e-3)
    assert normalizer_metrics(fake_env(3)) == {}


def test_norm_stats_of_wide_observations_are_capped_with_one_warning(caplog):
    env = NormalizeObs(fake_env(MAX_DIMS + 44))
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        first, _ = normalizer_metrics(env), normalizer_metrics(env)
    assert sum(k.startswith("norm/obs_mean/") for k in first) == MAX_DIMS
    assert len([r for r in caplog.records if "log_norm_stats" in r.message]) == 1


def test_registry_re_exports_the_one_logger_table():
    from rltrain.config import registry
    from rltrain.loggers import specs

    assert registry.LOGGERS is specs.LOGGERS
    assert list(specs.LOGGERS)[:2] == ["wandb", "swanlab"]  # service loggers are built first


def test_every_logger_spec_names_a_logger_config_switch():
    cfg = LoggerConfig()
    from rltrain.loggers.specs import LOGGERS

    for name, spec in LOGGERS.items():
        assert hasattr(cfg, spec.option), name
        assert spec.enabled(cfg) is (name == "csv")
        assert (spec.package is None) == (spec.extra is None)


def test_a_failed_logger_closes_the_ones_already_built(tmp_path, monkeypatch):
    from rltrain.loggers import specs

    closed = []

    class Fake:
        def log(self, metrics, step):
            pass

        def close(self):
            closed.append("wandb")

    def fail(*args):
        raise RuntimeError("tb broke")

    monkeypatch.setitem(specs.LOGGERS, "wandb", specs.LoggerSpec("wandb", lambda *a: Fake()))
    monkeypatch.setitem(specs.LOGGERS, "tensorboard", specs.LoggerSpec("tensorboard", fail))
    cfg = LoggerConfig(tensorboard=True)
    cfg.wandb.enabled = True
    with pytest.raises(RuntimeError, match="tb broke"):
        build_loggers(cfg, tmp_path)
    assert closed == ["wandb"]


def test_building_the_file_loggers_imports_no_service_package(tmp_path):
    import subprocess

    code = ("import sys; from pathlib import Path; from rltrain.loggers.config import LoggerConfig;"
            "from rltrain.loggers.base import build_loggers;"
            f"build_loggers(LoggerConfig(tensorboard=True), Path({str(tmp_path)!r})).close();"
            "print(sorted(m for m in ('wandb', 'swanlab') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
