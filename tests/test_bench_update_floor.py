"""The update-floor benchmark (benchmarks/update_floor.py): which matrix products it counts,
the env steps an update stands for, the table's ratios, and one real first update caught."""

from __future__ import annotations

import json
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
    names = [name for name, _, _ in products]
    assert names.count("aten::addmm") == 2 and names.count("aten::mm") == 3, products
    shapes = sorted(tuple(map(tuple, s)) for _, s, _ in products)
    assert ((32, 8), (8, 16)) in [s[1:] for s in shapes if len(s) == 3]  # addmm: bias, x, W1ᵀ


def test_products_without_bias_are_counted_once_not_again_inside_matmul():
    products = update_floor.update_products(TwoLayers(bias=False), (), {})
    assert len(products) == 5 and {name for name, _, _ in products} == {"aten::mm"}, products


def test_the_replay_runs_every_product_at_its_shape():
    products = update_floor.update_products(TwoLayers(), (), {})
    assert update_floor.time_products(products, repeats=2, block=2) > 0


class ConvStep:
    """An 'algorithm' whose update is one backward pass through two strided convolutions (the
    first without bias) and a linear head, on a channels-last image batch."""

    def __init__(self):
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Conv2d(4, 8, 8, stride=4, bias=False), nn.ReLU(),
                                 nn.Conv2d(8, 16, 4, stride=2, padding=1), nn.ReLU(),
                                 nn.Flatten(1), nn.Linear(16 * 4 * 4, 3))
        self.x = torch.randn(6, 4, 36, 36).contiguous(memory_format=torch.channels_last)

    def update(self) -> None:
        self.net.zero_grad()
        self.net(self.x).pow(2).mean().backward()


def test_convolutions_count_forward_and_backward_with_their_stride_and_padding():
    products = update_floor.update_products(ConvStep(), (), {})
    convs = [(name, shapes, scalars) for name, shapes, scalars in products if "conv" in name]
    assert [name for name, _, _ in convs].count("aten::conv2d") == 2, products
    assert [name for name, _, _ in convs].count("aten::convolution_backward") == 2, products
    forward = {tuple(shapes[1]): scalars for name, shapes, scalars in convs if name == "aten::conv2d"}
    assert forward[(8, 4, 8, 8)][:2] == [[4, 4], [0, 0]]  # stride 4, no padding
    assert forward[(16, 8, 4, 4)][:2] == [[2, 2], [1, 1]]
    no_bias = [shapes for name, shapes, _ in convs if name == "aten::conv2d" and not shapes[2]]
    assert len(no_bias) == 1
    # the first conv's input needs no gradient: its backward computes the weight's only
    masks = sorted(str(scalars[-1]) for name, _, scalars in convs if name == "aten::convolution_backward")
    assert masks == ["[False, True, False]", "[True, True, True]"], masks
    assert update_floor.time_products(products, repeats=2, block=2) > 0  # every one replays


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


def test_measuring_one_task_keeps_the_other_rows_in_place(tmp_path, monkeypatch):
    rows = [{**update_floor.floor_row(task, 0.002, 0.001, 5, 1.0, None, None), "date": "2026-11-25"}
            for task in ("sac:Hopper-v5", "dqn:MountainCar-v0")]
    update_floor.write(rows, tmp_path)
    fresh = update_floor.floor_row("sac:Hopper-v5", 0.004, 0.003, 26, 0.5, None, None)
    monkeypatch.setattr(update_floor, "measure", lambda task, repeats, runs: fresh)
    monkeypatch.setattr(update_floor.torch, "set_num_threads", lambda n: None)  # the worker's own
    update_floor.main(["--tasks", "sac:Hopper-v5", "--out", str(tmp_path)])
    kept = json.loads((tmp_path / "update_floor.json").read_text())
    assert [r["task"] for r in kept] == ["sac:Hopper-v5", "dqn:MountainCar-v0"]
    assert kept[0]["update_ms"] == 4.0 and kept[1]["update_ms"] == 2.0
