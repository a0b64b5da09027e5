"""wandb logger: an offline run in the run dir with the composed config, resume, bad logins."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rltrain.config.schema import LoggerConfig, WandbConfig
from rltrain.errors import UserError
from rltrain.runner.runner import Runner

wandb = pytest.importorskip("wandb")


@pytest.fixture(autouse=True)
def _wandb_env(tmp_path, monkeypatch):
    """Offline, and wandb's caches and settings inside the test's folder."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    yield
    wandb.teardown()  # wandb reads the environment once per process: the next test sets its own


def records(path: Path) -> Iterator:
    """The protobuf records of a `.wandb` transaction log (leveldb-style 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, chunks = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # block trailer
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        chunks = chunk if kind in (1, 2) else chunks + chunk  # 1 full, 2 first, 3 middle, 4 last
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(chunks)
            yield record


def settled_records(path: Path, timeout: float = 30.0) -> list:
    """The log's records once its run record is there: wandb's service process writes the
    transaction log on its own clock, and on a loaded machine (a CI run with benchmarks beside
    it) a read right after `finish()` found no run record yet. Waits at most `timeout` seconds,
    then returns what there is (the assertions then say what is missing)."""
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout
    while True:
        try:
            recs = list(records(path))
        except (AssertionError, struct.error, DecodeError):  # a record not fully written yet
            if time.monotonic() > deadline:
                raise
            recs = []
        if any(r.WhichOneof("record_type") == "run" for r in recs) or time.monotonic() > deadline:
            return recs
        time.sleep(0.2)


def offline_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def test_offline_run_is_created_in_the_run_dir_with_the_composed_config(tmp_path, tiny_cfg):
    import json

    wb = WandbConfig(enabled=True, project="rl-test", group="g1", tags=["ppo", "smoke"])
    cfg = tiny_cfg(logger={"wandb": wb, "log_freq": 0}, seed=7)
    run_dir = tmp_path / "2024-05-01" / "12-00-00"
    Runner(cfg, run_dir).run()
    (offline,) = offline_runs(run_dir)
    (log_file,) = offline.glob("run-*.wandb")
    recs = settled_records(log_file)
    (run,) = [r.run for r in recs if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.run_group, list(run.tags)) == ("rl-test", "g1", ["ppo", "smoke"])
    assert run.display_name == "2024-05-01/12-00-00"
    assert (run_dir / "wandb" / "run_id").read_text() == run.run_id
    config = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert config["algo"]["name"] == "ppo" and config["algo"]["n_steps"] == 16
    assert (config["env"]["id"], config["seed"]) == ("CartPole-v1", 7)
    assert config["logger"]["wandb"]["tags"] == ["ppo", "smoke"]
    rows = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            for r in recs if r.WhichOneof("record_type") == "history"]
    train_steps = [r["global_step"] for r in rows if "train/policy_loss" in r]
    assert train_steps == [32, 64]  # 2 envs x 16 steps per update, logged after each
    assert any("eval/mean_reward" in r and r["global_step"] == 64 for r in rows)


def test_resumed_run_continues_the_same_wandb_run(tmp_path):
    from rltrain.loggers.wandb import WandbLogger

    first = WandbLogger(WandbConfig(enabled=True), tmp_path, {"seed": 0})
    first.log({"x": 1.0}, step=10)
    first.close()
    again = WandbLogger(WandbConfig(enabled=True), tmp_path, {"seed": 0}, resumed=True)
    again.log({"x": 2.0}, step=5)  # a resume re-logs steps after the checkpoint: not an error
    again.close()
    fresh = WandbLogger(WandbConfig(enabled=True), tmp_path, {"seed": 0})
    fresh.close()
    assert again.run.id == first.run.id != fresh.run.id


def test_wandb_mode_env_var_decides_when_mode_is_unset(tmp_path, monkeypatch):
    from rltrain.loggers.base import build_loggers

    monkeypatch.setenv("WANDB_MODE", "disabled")
    loggers = build_loggers(LoggerConfig(wandb=WandbConfig(enabled=True), csv=False), tmp_path)
    loggers.log({"x": 1.0}, step=1)
    loggers.close()
    assert not (tmp_path / "wandb").exists()


def test_online_without_an_api_key_is_a_one_line_error(tmp_path, monkeypatch):
    from rltrain.loggers.wandb import WandbLogger

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv("WANDB_MODE")
    with pytest.raises(UserError) as exc:
        WandbLogger(WandbConfig(enabled=True), tmp_path, {})
    message = str(exc.value)
    assert message.startswith("wandb: ") and "WANDB_MODE=offline" in message
    assert "\n" not in message
