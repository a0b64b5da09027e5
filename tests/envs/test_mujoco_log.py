"""MuJoCo's C-level warnings reach the user as one `rltrain` log line per kind, not as repeated
blocks on stderr (gymnasium's HalfCheetah model warns of 'settotalmass' under mujoco 4.x)."""

from __future__ import annotations

import logging

import pytest

from rltrain.config.schema import EnvConfig
from rltrain.envs import mujoco_log
from rltrain.envs.make import make_env

mujoco = pytest.importorskip("mujoco")


@pytest.fixture
def fresh(monkeypatch):
    """No handler and nothing seen yet; the previous handler is put back afterwards."""
    before = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(None)
    monkeypatch.setattr(mujoco_log, "_seen", set())
    yield
    mujoco.set_mju_user_warning(before)


def test_building_halfcheetah_twice_logs_its_model_warning_once_and_prints_none(
        fresh, caplog, capfd):
    caplog.set_level(logging.WARNING, logger="rltrain")
    for _ in range(2):
        env = make_env(EnvConfig(id="HalfCheetah-v5", num_envs=2))
        env.reset(seed=0)
        env.close()
    records = [r.getMessage() for r in caplog.records if "MuJoCo:" in r.getMessage()]
    assert len(records) == 1 and "settotalmass" in records[0], records
    assert "settotalmass" not in capfd.readouterr().err


def test_messages_that_differ_only_in_numbers_are_one_kind(fresh, caplog):
    caplog.set_level(logging.WARNING, logger="rltrain")
    mujoco_log.log_mujoco_warning("Nan, Inf or huge value in QACC at DOF 3. Time = 0.1200.")
    mujoco_log.log_mujoco_warning("Nan, Inf or huge value in QACC at DOF 5. Time = 2.5e+01.")
    mujoco_log.log_mujoco_warning("Too many contacts. Time = 1.0.")
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "MuJoCo: Nan, Inf or huge value in QACC at DOF 3. Time = 0.1200.",
        "MuJoCo: Too many contacts. Time = 1.0."]


def test_a_handler_of_ones_own_is_left_in_place(fresh):
    mine: list[str] = []
    mujoco.set_mju_user_warning(mine.append)
    mujoco_log.route_mujoco_warnings()
    assert mujoco.get_mju_user_warning() == mine.append
