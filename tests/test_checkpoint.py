"""Checkpoints: atomic save, weights-only load, refusal of foreign or hostile files, RNG state."""

from __future__ import annotations

import pickle
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from rltrain.algos.ppo import PPO
from rltrain.checkpoint import format as checkpoint
from rltrain.config.schema import config_to_dict
from rltrain.errors import TrainingError, UserError
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
    with pytest.raises(TrainingError, match=r"^checkpoint payload bad: function is not plain data"):
        checkpoint.save({"config": {}, "bad": lambda: None}, path)  # code is never written
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


@pytest.mark.parametrize("content", [np.random.default_rng(0).bytes(4096), b"hi\n", b""],
                         ids=["random", "text", "empty"])
def test_load_refuses_a_file_torch_save_never_wrote(tmp_path, content):
    path = tmp_path / "random.pt"
    path.write_bytes(content)
    with pytest.raises(UserError) as err:
        checkpoint.load(path)
    assert str(err.value) == (f"{path} is not a readable rltrain checkpoint (not a file "
                              f"torch.save wrote: it is neither a zip archive nor a pickle)")


def test_a_file_that_cannot_be_read_is_still_one_line(tmp_path, monkeypatch):
    path = tmp_path / "text.pt"
    path.write_bytes(b"hi\n")
    real_open = Path.open

    def failing_open(self, *args, **kwargs):
        if self == path:
            raise OSError(5, "Input/output error")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", failing_open)
    with pytest.raises(UserError, match="is not a readable rltrain checkpoint") as err:
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


def test_rng_state_leaves_cuda_alone_until_the_process_uses_it(monkeypatch):
    """On a GPU machine, asking for the CUDA generators' states starts CUDA on every GPU: a
    CPU run's first checkpoint, or an evaluation called from Python (which keeps the caller's
    random state), took memory on each GPU of a shared node."""
    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: asked.append(1) or [])
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert "cuda" not in checkpoint.rng_state() and asked == []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert checkpoint.rng_state()["cuda"] == [] and asked == [1]


# ---- what a checkpoint may contain: checked before writing (issue 20) --------------------------

class Opaque:
    """An object of one's own: pickled by naming its class, which loading would have to import."""


@pytest.mark.parametrize(("bad", "key", "what"), [
    (Path("/tmp/x"), "env.sim.envs[0][2].attrs.where", "pathlib.PosixPath"),
    (np.array([1, None], dtype=object), "env.sim.envs[0][2].attrs.where",
     "numpy.ndarray of dtype object"),
    (lambda: None, "env.sim.envs[0][2].attrs.where", "function"),
    ({1, 2}, "env.sim.envs[0][2].attrs.where", "set"),
    (Opaque(), "env.sim.envs[0][2].attrs.where", "tests.test_checkpoint.Opaque"),
    (np.complex128(1j), "env.sim.envs[0][2].attrs.where", "numpy.complex128 of dtype complex128"),
])
def test_save_refuses_what_is_not_plain_data_and_keeps_the_previous_file(tmp_path, tiny_cfg, bad,
                                                                         key, what):
    path = checkpoint.save(payload(tiny_cfg), tmp_path / "latest.pt")
    before = path.read_bytes()
    layers = [{"attrs": {}}, {"attrs": {}}, {"attrs": {"ok": 1.0, "where": bad}}]
    data = {**payload(tiny_cfg), "env": {"sim": {"envs": [layers]}}}
    with pytest.raises(TrainingError) as err:
        checkpoint.save(data, path)
    assert str(err.value).startswith(f"checkpoint payload {key}: {what} is not plain data")
    assert "\n" not in str(err.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt"]


def test_save_refuses_a_dict_key_that_is_not_a_str(tmp_path):
    with pytest.raises(TrainingError, match=r"^checkpoint payload metrics: key 1.5 is a float"):
        checkpoint.save({"config": {}, "metrics": {1.5: 2}}, tmp_path / "x.pt")


def test_save_turns_numpy_values_into_python_numbers_and_tensors(tmp_path):
    values = {"f64": np.float64(0.25), "i8": np.int8(-3), "u64": np.uint64(2**64 - 1),
              "b": np.bool_(True), "f16": np.float16(1.5), "arr": np.arange(3, dtype=">u2"),
              "zero_d": np.array(2.5), "nested": [(np.int32(1), np.float32(0.5))]}
    loaded = checkpoint.load(checkpoint.save({"config": {}, "x": values}, tmp_path / "a.pt"))["x"]
    assert loaded["f64"] == 0.25 and type(loaded["f64"]) is float
    assert loaded["i8"] == -3 and type(loaded["i8"]) is int
    assert loaded["u64"] == 2**64 - 1 and loaded["b"] is True and loaded["f16"] == 1.5
    assert torch.equal(loaded["arr"], torch.tensor([0, 1, 2], dtype=torch.uint16))
    assert loaded["zero_d"].shape == () and float(loaded["zero_d"]) == 2.5
    assert loaded["nested"] == [(1, 0.5)]


def poisoned(tiny_cfg, where: str) -> dict:
    data = payload(tiny_cfg)
    if where == "weights":
        next(iter(data["algo"]["policy"].values()))[0] = float("nan")
    elif where == "optimizer":
        next(iter(data["algo"]["optimizer"]["state"].values()))["exp_avg"].fill_(float("inf"))
    elif where == "obs_rms":
        data["env"] = {"obs_rms": {"mean": torch.tensor([0.0, float("nan")], dtype=torch.float64),
                                   "var": torch.ones(2, dtype=torch.float64), "count": 3.0}}
    elif where == "replay":
        data["replay"] = {"rewards": torch.tensor([1.0, float("-inf")])}
    elif where == "best_eval":
        data["counters"]["best_eval"] = float("nan")
    return data


@pytest.mark.parametrize(("where", "message"), [
    ("weights", r"^non-finite algo\.policy\.\S+ at step 1,234; try a lower algo\.lr"),
    ("optimizer", r"^non-finite algo\.optimizer\.state\[\d+\]\.exp_avg at step 1,234; try a "),
    ("obs_rms", r"^non-finite env\.obs_rms\.mean at step 1,234: the environment produced NaN/inf "
                r"observations$"),
    ("replay", r"^non-finite replay\.rewards at step 1,234: the environment produced NaN/inf "),
    ("best_eval", r"^non-finite counters\.best_eval at step 1,234: an evaluation returned NaN"),
])
def test_save_refuses_a_non_finite_payload_and_keeps_the_previous_file(tmp_path, tiny_cfg, where,
                                                                      message):
    path = checkpoint.save(payload(tiny_cfg), tmp_path / "latest.pt")
    before = path.read_bytes()
    with pytest.raises(TrainingError, match=message):
        checkpoint.save(poisoned(tiny_cfg, where), path)
    assert path.read_bytes() == before


def test_nan_by_design_is_saved_where_it_is_allowed(tmp_path, tiny_cfg):
    data = payload(tiny_cfg)
    data["counters"]["best_eval"] = float("-inf")  # no evaluation yet
    data["loop"] = {"metrics": {"train/explained_variance": float("nan")}}
    data["metrics"] = {"mean_reward": float("nan")}
    data["config"]["algo"]["target_kl"] = float("inf")  # the config is validated on its own
    loaded = checkpoint.load(checkpoint.save(data, tmp_path / "a.pt"))
    assert loaded["counters"]["best_eval"] == float("-inf")


# ---- checkpoints of rltrain 0.1 held numpy scalars: read them, and nothing more -----------------

def legacy_file(tmp_path, extra) -> Path:
    """A checkpoint as rltrain 0.1 wrote it: torch.save of numpy values, no conversion."""
    path = tmp_path / "old.pt"
    torch.save({"format_version": 1, "config": {}, "env": {"sim": {"x": extra}}}, path)
    return path


def with_pickle(tmp_path, body: bytes) -> Path:
    """A torch zip file whose pickle is `body` (hand-written opcodes)."""
    torch.save({"format_version": 1, "config": {}}, tmp_path / "model.pt")
    path = tmp_path / "old.pt"
    with zipfile.ZipFile(tmp_path / "model.pt") as src, zipfile.ZipFile(path, "w") as out:
        for name in src.namelist():
            out.writestr(name, body if name.endswith("data.pkl") else src.read(name))
    return path


def test_numpy_scalars_of_old_checkpoints_load_as_python_numbers(tmp_path):
    values = {d: np.dtype(d).type(1) for d in ("bool", "int8", "int16", "int32", "int64", "uint8",
                                               "uint16", "uint32", "uint64", "float16", "float32",
                                               "float64")}
    values["prev_shaping"] = np.float64(-224.0229)  # LunarLander's, the value that broke it
    values["big_endian"] = np.array(7, dtype=">i4")[()]
    loaded = checkpoint.load(legacy_file(tmp_path, values))["env"]["sim"]["x"]
    assert loaded["prev_shaping"] == -224.0229 and type(loaded["prev_shaping"]) is float
    assert loaded["bool"] is True and loaded["big_endian"] == 7
    assert all(type(loaded[k]) in (bool, int, float) for k in values)


class NumpyDtypeCall:
    """Pickles as a call of `numpy.dtype(name)`: what an object-dtype scalar would need."""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return (np.dtype, (self.name, False, True))


# `{"format_version": 1, "config": {}, "x": numpy.dtype.__new__(numpy.dtype)}` + BUILD: a dtype
# made without its constructor (and its check), which no pickler writes for a real dtype
NEWOBJ_DTYPE = (b"\x80\x02}q\x00(X\x0e\x00\x00\x00format_versionK\x01X\x06\x00\x00\x00config}"
                b"X\x01\x00\x00\x00xcnumpy\ndtype\n)\x81(K\x03X\x01\x00\x00\x00<NNN"
                b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tbu.")


@pytest.mark.parametrize(("extra", "fragment"), [
    (np.array([1, None], dtype=object), "it names numpy._core.multiarray._reconstruct"),
    (np.arange(3), "it names numpy._core.multiarray._reconstruct"),
    (Path("/etc"), "it names pathlib"),
    (NumpyDtypeCall("O"), "numpy dtype 'O' is not a numeric dtype"),
    (NumpyDtypeCall("U8"), "numpy dtype 'U8' is not a numeric dtype"),
    (NEWOBJ_DTYPE, "malformed numpy dtype"),
])
def test_old_checkpoints_with_anything_but_numeric_scalars_are_refused(tmp_path, extra, fragment):
    if isinstance(extra, bytes):
        path = with_pickle(tmp_path, extra)
    else:
        path = legacy_file(tmp_path, extra)
    with pytest.raises(UserError) as err:
        checkpoint.load(path)
    message = str(err.value)
    assert message.startswith(f"{path} is not a readable rltrain checkpoint")
    assert fragment in message and "\n" not in message and "\x1b" not in message


def test_numpy_stand_ins_are_allowed_only_while_loading(tmp_path):
    checkpoint.load(legacy_file(tmp_path, np.float64(1.0)))
    with pytest.raises(pickle.UnpicklingError, match="numpy._core.multiarray.scalar"):
        torch.load(tmp_path / "old.pt", weights_only=True)
