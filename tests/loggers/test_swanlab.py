"""SwanLab logger: an offline experiment in `<run>/swanlog/` with the composed config, resume."""

from __future__ import annotations

import pytest
import yaml

from rltrain.config.schema import SwanlabConfig
from rltrain.runner.runner import Runner

swanlab = pytest.importorskip("swanlab")


@pytest.fixture(autouse=True)
def _swanlab_home(tmp_path, monkeypatch):
    """SwanLab's own settings folder inside the test's folder."""
    monkeypatch.setenv("SWANLAB_SAVE_DIR", str(tmp_path / "swanlab_home"))
    monkeypatch.setenv("HOME", str(tmp_path))


def test_offline_experiment_is_created_in_the_run_dir_with_the_composed_config(tmp_path, tiny_cfg):
    cfg = tiny_cfg(logger={"swanlab": SwanlabConfig(enabled=True, tags=["ppo"]), "log_freq": 0},
                   seed=5)
    run_dir = tmp_path / "run"
    Runner(cfg, run_dir).run()
    (experiment,) = (run_dir / "swanlog").glob("run-*")
    run_id = (run_dir / "swanlog" / "run_id").read_text()
    assert experiment.name.endswith(run_id) and (experiment / f"run-{run_id}.swanlab").is_file()
    config = yaml.safe_load((experiment / "files" / "config.yaml").read_text())
    assert config["algo"]["value"]["name"] == "ppo" and config["seed"]["value"] == 5
    assert config["logger"]["value"]["swanlab"]["tags"] == ["ppo"]


def test_resumed_run_continues_the_same_experiment(tmp_path):
    from rltrain.loggers.swanlab import SwanlabLogger

    first = SwanlabLogger(SwanlabConfig(enabled=True), tmp_path, {"seed": 0})
    first.log({"x": 1.0}, step=10)
    first.close()
    again = SwanlabLogger(SwanlabConfig(enabled=True), tmp_path, {"seed": 0}, resumed=True)
    again.log({"x": 2.0}, step=5)
    again.close()
    assert again.run.id == first.run.id
