"""Checkpoints: atomic save, weights-only load, refusal of foreign or hostile files, RNG state."""

from __future__ import annotations

import pickle
import random
import zipfile

import numpy as np
import pytest
import torch

from rltrain import checkpoint
from rltrain.algos.ppo import PPO
from rltrain.config import config_to_dict
from rltrain.errors import UserError
from rltrain.types import EnvSpec


def payload(tiny_cfg) -> dict:
    """What the Runner writes: a PPO's state, a config dict, counters and RNG states."""
    torch.manual_seed(0)
    cfg = tiny_cfg()
    algo = PPO(cfg.algo, EnvSpec((4,), "discrete", 2, 2))
    # one optimizer step so the Adam state holds tensors too
    algo.policy.value(torch.ones(3, 4)).sum().backward()
    algo.optimizer.step()
    return {"config": config_to_dict(cfg), "algo": algo.state_dict(), "env": {},
            "counters": {"global_step": 1234, "iteration": 7, "best_eval": 42.5},
            "rng": checkpoint.rng_state(), "metrics": {"mean_reward": 42.5}}


def assert_same(a, b, where="payload"):
    """Recursive equality of nested dicts/lists/tuples of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_save_load_round_trip_gives_equal_tensors_and_values(tmp_path, tiny_cfg):
    data = payload(tiny_cfg)
    path = checkpoint.save(data, tmp_path / "checkpoints" / "latest.pt")
    loaded = checkpoint.load(path)
    assert loaded["format_version"] == checkpoint.FORMAT_VERSION
    assert_same({"format_version": checkpoint.FORMAT_VERSION, **data}, loaded)


def test_loaded_state_restores_a_fresh_algorithm_exactly(tmp_path, tiny_cfg):
    data = payload(tiny_cfg)
    checkpoint.save(data, tmp_path / "a.pt")
    cfg = tiny_cfg()
    torch.manual_seed(123)  # different init
    fresh = PPO(cfg.algo, EnvSpec((4,), "discrete", 2, 2))
    fresh.load_state_dict(checkpoint.load(tmp_path / "a.pt")["algo"])
    assert_same(data["algo"], fresh.state_dict())


def test_save_leaves_no_temp_file_and_replaces_atomically(tmp_path):
    path = tmp_path / "latest.pt"
    checkpoint.save({"config": {}, "counters": {"global_step": 1}}, path)
    checkpoint.save({"config": {}, "counters": {"global_step": 2}}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]
    assert checkpoint.load(path)["counters"]["global_step"] == 2


def test_failed_save_keeps_the_previous_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "latest.pt"
    checkpoint.save({"config": {}, "counters": {"global_step": 1}}, path)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        checkpoint.save({"config": {}, "bad": lambda: None}, path)  # lambdas cannot be pickled
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]
    assert checkpoint.load(path)["counters"]["global_step"] == 1


def test_run_directory_resolves_to_its_latest_checkpoint(tmp_path):
    checkpoint.save({"config": {}}, tmp_path / "checkpoints" / "latest.pt")
    assert checkpoint.resolve(tmp_path) == tmp_path / "checkpoints" / "latest.pt"
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(UserError, match="no checkpoints/latest.pt"):
        checkpoint.resolve(tmp_path / "empty_run")


def test_load_of_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        checkpoint.load(tmp_path / "nope.pt")


def test_load_refuses_random_bytes(tmp_path):
    path = tmp_path / "random.pt"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(UserError, match="not a readable rltrain checkpoint") as err:
        checkpoint.load(path)
    assert "\n" not in str(err.value)


def test_load_refuses_a_truncated_file(tmp_path, tiny_cfg):
    path = checkpoint.save(payload(tiny_cfg), tmp_path / "full.pt")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(UserError, match="not a readable rltrain checkpoint") as err:
        checkpoint.load(cut)
    assert "\n" not in str(err.value)


class CreatesMarker:
    """Unpickling this calls `open(marker, "w")`: it would create the marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("fmt", ["torch_zip", "raw_pickle"])
def test_load_refuses_a_pickle_carrying_code_and_never_runs_it(tmp_path, fmt):
    marker = tmp_path / "payload_ran"
    path = tmp_path / "evil.pt"
    evil = {"format_version": 1, "config": {}, "algo": CreatesMarker(str(marker))}
    if fmt == "torch_zip":
        torch.save(evil, path)
    else:
        path.write_bytes(pickle.dumps(evil, protocol=2))  # torch's own protocol
    with pytest.raises(UserError, match="not a readable rltrain checkpoint"):
        checkpoint.load(path)
    assert not marker.exists()
    pickle.loads(pickle.dumps(CreatesMarker(str(marker))))  # proof the payload does run if unpickled
    assert marker.exists()


def test_load_refuses_a_newer_format_version(tmp_path):
    path = tmp_path / "future.pt"
    torch.save({"format_version": checkpoint.FORMAT_VERSION + 1, "config": {}}, path)
    with pytest.raises(UserError, match=f"format {checkpoint.FORMAT_VERSION + 1}.*upgrade"):
        checkpoint.load(path)


@pytest.mark.parametrize("content", [[1, 2, 3], {"weights": torch.zeros(2)}])
def test_load_refuses_a_torch_file_that_is_not_an_rltrain_checkpoint(tmp_path, content):
    path = tmp_path / "other.pt"
    torch.save(content, path)
    with pytest.raises(UserError, match="not an rltrain checkpoint"):
        checkpoint.load(path)


def test_load_refuses_a_zip_that_is_not_a_torch_file(tmp_path):
    path = tmp_path / "archive.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(UserError, match="not a readable rltrain checkpoint"):
        checkpoint.load(path)


def draw_numbers() -> tuple:
    return (torch.rand(3).tolist(), np.random.rand(3).tolist(), np.random.randn(),
            [random.random() for _ in range(3)])


def test_rng_state_round_trip_reproduces_the_same_random_numbers(tmp_path):
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    np.random.randn()  # leaves a cached Gaussian in numpy's legacy state
    checkpoint.save({"config": {}, "rng": checkpoint.rng_state()}, tmp_path / "rng.pt")
    first = draw_numbers()
    draw_numbers()  # move every generator on
    checkpoint.set_rng_state(checkpoint.load(tmp_path / "rng.pt")["rng"])
    assert draw_numbers() == first
