"""benchmarks/seed_batch_floor.py: a batch's first update is caught on its stacked algorithm
(inputs with a seed dimension), the class is given its update back, the products scale with the
seeds, and the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import seed_batch_floor  # noqa: E402

from rltrain.algos.dqn import DQN  # noqa: E402
from rltrain.algos.ppo import PPO  # noqa: E402


@pytest.mark.parametrize("algo, cls", [("ppo", PPO), ("dqn", DQN)])
def test_a_batch_is_caught_at_its_first_stacked_update_and_the_class_keeps_its_update(algo, cls, tmp_path):
    """The batch's algorithm is the class's own, stacked (`cls.stack`)."""
    real = cls.update
    agent, args, kwargs, cfg = seed_batch_floor.first_update(algo, "CartPole-v1", 1500, 3, tmp_path)
    assert type(agent) is cls and cls.update is real
    assert cfg.num_seeds == 3 and args[0].actions.shape[0] == 3  # [S, ...]: a row per seed
    single, args, *_ = seed_batch_floor.first_update(algo, "CartPole-v1", 1500, 1, tmp_path / "one")
    assert type(single) is cls and cls.update is real
    assert args[0].actions.shape[0] != 3  # a single run's rows, no seed dimension


def test_the_batchs_products_cost_more_than_one_seeds_over_the_same_updates(tmp_path):
    one = seed_batch_floor.run_products("dqn", "CartPole-v1", 1500, 1, tmp_path / "a", repeats=2)
    many = seed_batch_floor.run_products("dqn", "CartPole-v1", 1500, 4, tmp_path / "b", repeats=2)
    assert one["updates"] == many["updates"] == (1500 - 1000) / 2  # train_freq 256 x 1 env / 128 steps
    assert many["products"] == one["products"] and many["products_per_update_s"] > one["products_per_update_s"]
    assert many["products_run_s"] == pytest.approx(many["products_per_update_s"] * many["updates"])


def test_the_table_gives_the_floor_in_multiples_of_one_seed(tmp_path):
    row = {"task": "dqn:CartPole-v1:50000", "seeds": 8, "date": "2026-11-27", "target": 2.5,
           "single": {"products_run_s": 20.0}, "batch": {"products_run_s": 120.0, "updates": 24500},
           "one_seed_s": 40.0, "floor_x_one_seed": 3.0}
    seed_batch_floor.write([row], tmp_path)
    assert json.loads((tmp_path / "seed_batch_floor.json").read_text()) == [row]
    line = (tmp_path / "seed_batch_floor.md").read_text().splitlines()[-1]
    assert line == "| dqn:CartPole-v1:50000 | 8 | 24,500 | 20.0 | 120.0 | 40.0 | 3.00 | 2.5 |"
