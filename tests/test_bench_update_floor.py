"""The update-floor benchmark (benchmarks/update_floor.py): which matrix products it counts,
the env steps an update stands for, the table's ratios, and one real first update caught."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import update_floor  # noqa: E402


class TwoLayers:
    """An 'algorithm' whose update is one SGD step of a 2-layer MLP on a fixed batch."""

    def __init__(self, bias: bool = True):
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16, bias=bias), nn.ReLU(), nn.Linear(16, 3, bias=bias))
        self.x = torch.randn(32, 8)

    def update(self) -> None:
        self.net.zero_grad()
        self.net(self.x).pow(2).mean().backward()


def test_an_mlp_step_issues_two_forward_products_and_three_backward_ones():
    # forward: x W1 + b1, h W2 + b2; backward: the grads of W2, W1 and of h (none for x: no grad)
    products = update_floor.update_products(TwoLayers(), (), {})
    names = [name for name, _ in products]
    assert names.count("aten::addmm") == 2 and names.count("aten::mm") == 3, products
    shapes = sorted(tuple(map(tuple, s)) for _, s in products)
    assert ((32, 8), (8, 16)) in [s[1:] for s in shapes if len(s) == 3]  # addmm: bias, x, W1ᵀ


def test_products_without_bias_are_counted_once_not_again_inside_matmul():
    products = update_floor.update_products(TwoLayers(bias=False), (), {})
    assert len(products) == 5 and {name for name, _ in products} == {"aten::mm"}, products


def test_the_replay_runs_every_product_at_its_shape():
    products = update_floor.update_products(TwoLayers(), (), {})
    assert update_floor.time_products(products, repeats=2, block=2) > 0


def test_env_steps_per_update_off_and_on_policy():
    off = SimpleNamespace(env=SimpleNamespace(num_envs=4), algo=SimpleNamespace(train_freq=16, gradient_steps=8))
    assert update_floor.env_steps_per_update(off, on_policy=False) == 8  # 16 x 4 / 8
    on = SimpleNamespace(env=SimpleNamespace(num_envs=8), algo=SimpleNamespace(n_steps=128))
    assert update_floor.env_steps_per_update(on, on_policy=True) == 1024


def test_the_floor_ratio_is_the_products_per_env_step_over_sb3s_seconds_per_env_step():
    runs = {"dqn:MountainCar-v0": {
        "sb3": {"0": {"seconds": 120.0}, "1": {"seconds": 180.0}, "2": {"seconds": 150.0}},
        "rltrain": {"0": {"seconds": 90.0}}}}
    sb3, ours = update_floor.seconds_per_step(runs, "dqn:MountainCar-v0", 100_000)
    assert sb3 == pytest.approx(150.0 / 100_000) and ours == pytest.approx(90.0 / 100_000)
    row = update_floor.floor_row("dqn:MountainCar-v0", update_s=0.002, products_s=0.0015,
                                 n_products=11, per_update=2.0, sb3=sb3, ours=ours)
    assert row["share"] == pytest.approx(0.75)
    assert row["floor_ratio"] == pytest.approx(0.00075 / 0.0015)  # 0.5
    assert row["ratio_now"] == pytest.approx(0.6)
    missing = update_floor.floor_row("x", 0.002, 0.001, 5, 1.0, *update_floor.seconds_per_step({}, "x", 10))
    assert missing["floor_ratio"] is None and missing["ratio_now"] is None


def test_a_real_preset_run_is_caught_at_its_first_update(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent, args, kwargs, cfg, on_policy = update_floor.first_update("ppo", "CartPole-v1")
    assert on_policy and "progress_remaining" in kwargs
    assert update_floor.env_steps_per_update(cfg, True) == cfg.algo.n_steps * cfg.env.num_envs
    assert "update" not in vars(agent)  # the instance's catcher is gone: the class's update runs
    assert update_floor.update_products(agent, args, kwargs)  # the real update issues products


def test_report_takes_the_seconds_from_quality_json_again(tmp_path):
    measured = update_floor.floor_row("dqn:MountainCar-v0", 0.002, 0.0015, 11, 2.0, None, None)
    update_floor.write([{**measured, "date": "2026-11-25"}], tmp_path)
    assert "missing" in (tmp_path / "update_floor.md").read_text()
    runs = {"dqn:MountainCar-v0": {"sb3": {"0": {"seconds": 180.0}}, "rltrain": {"0": {"seconds": 90.0}}}}
    row = update_floor.rescore(measured, runs)
    assert row["floor_ratio"] == pytest.approx(0.00075 / (180.0 / 120_000))  # the task's budget: 120k
    assert row["ratio_now"] == pytest.approx(0.5) and row["products_ms"] == measured["products_ms"]
