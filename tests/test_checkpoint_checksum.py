"""A checkpoint's checksum (`rltrain/checkpoint/checksum.py`): written by `save`, checked by
`load`; damaged bytes are refused in one line, files without one still load."""

from __future__ import annotations

import zipfile
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from rltrain.checkpoint import checksum
from rltrain.checkpoint import format as checkpoint
from rltrain.errors import UserError
from tests.test_checkpoint import assert_same


def sample() -> dict:
    """A small payload with every kind of value a checkpoint holds."""
    gen = torch.Generator().manual_seed(0)
    return {"config": {"algo": {"name": "ppo", "lr": 3e-4}, "seed": 0},
            "algo": {"policy": OrderedDict(w=torch.randn(64, 32, generator=gen),
                                           b=torch.zeros(32, dtype=torch.float64)),
                     "optim": {"state": {0: {"step": torch.tensor(3.0)}}, "lr": [1e-3, None]}},
            "counters": {"global_step": 1234, "iteration": 7, "best_eval": -12.5},
            "rng": {"python": (3, tuple(range(625)), None), "flag": True}}


def record(path: Path, suffix: str) -> tuple[int, int]:
    """(offset, size) in the file of the zip record whose name ends with `suffix` (torch
    stores records uncompressed, so these are the bytes `torch.load` reads)."""
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(suffix))
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = (int.from_bytes(f.read(2), "little") for _ in range(2))
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def flip(path: Path, start: int, count: int) -> None:
    """Invert `count` bytes of `path` from `start`."""
    data = bytearray(path.read_bytes())
    data[start:start + count] = bytes(b ^ 0xFF for b in data[start:start + count])
    path.write_bytes(bytes(data))


def test_save_writes_the_digest_of_the_payload_and_load_returns_it_without(tmp_path):
    path = checkpoint.save(sample(), tmp_path / "latest.pt")
    raw = torch.load(path, weights_only=True)
    assert list(raw)[0] == checksum.KEY and raw[checksum.KEY].startswith("sha256:")
    assert raw[checksum.KEY] == checksum.digest({"format_version": 1, **sample()})
    assert_same({"format_version": 1, **sample()}, checkpoint.load(path))


@pytest.mark.parametrize("change", [
    lambda p: p["algo"]["policy"]["w"].__setitem__((3, 4), 0.5),
    lambda p: p["algo"]["policy"].__setitem__("w", p["algo"]["policy"]["w"].reshape(32, 64)),
    lambda p: p["algo"]["policy"].__setitem__("b", torch.zeros(64, dtype=torch.float32)),
    lambda p: p["counters"].__setitem__("iteration", 7.0),
    lambda p: p["rng"].__setitem__("flag", 1),
    lambda p: p["rng"].__setitem__("python", [3, tuple(range(625)), None]),
    lambda p: p["algo"].__setitem__("policy", dict(p["algo"]["policy"])),
    lambda p: p["config"].__setitem__("seed", "0"),
    lambda p: p["algo"]["optim"]["lr"].append(None),
    lambda p: p.__setitem__("counters", dict(reversed(p["counters"].items()))),
], ids=["value", "shape", "dtype", "int-float", "bool-int", "tuple-list", "odict-dict", "str",
        "length", "order"])
def test_any_change_to_values_types_or_layout_changes_the_digest(change):
    changed = sample()
    change(changed)
    assert checksum.digest(changed) != checksum.digest(sample())


def test_a_large_tensor_hashes_the_same_on_any_number_of_threads(monkeypatch):
    big = torch.arange((3 * checksum._CHUNK) // 4 + 5, dtype=torch.float32)  # 3 chunks and a bit
    digests = set()
    for threads in (1, 2):
        monkeypatch.setattr(torch, "get_num_threads", lambda n=threads: n)
        digests.add(checksum.digest({"replay": big}))
    assert len(digests) == 1
    big[-1] += 1  # the last, short chunk
    assert checksum.digest({"replay": big}) not in digests


def test_flipped_tensor_bytes_are_refused_in_one_line_naming_final_and_best(tmp_path):
    for name in ("latest.pt", "final.pt", "best.pt"):
        checkpoint.save(sample(), tmp_path / "checkpoints" / name)
    latest = tmp_path / "checkpoints" / "latest.pt"
    start, size = record(latest, "data/0")  # policy.w: 64 x 32 floats
    flip(latest, start + 1000, 200)
    assert torch.load(latest, weights_only=True)["counters"]["global_step"] == 1234  # torch: fine
    with pytest.raises(UserError) as err:
        checkpoint.load(latest)
    final, best = latest.with_name("final.pt"), latest.with_name("best.pt")
    assert str(err.value) == (f"{latest} is damaged (its checksum does not match its contents): "
                              f"use {final} or {best} of the run, or another checkpoint")
    final.unlink()
    best.unlink()
    with pytest.raises(UserError, match=r"use another checkpoint \(the run has no final.pt or "
                                        r"best.pt beside it\)$"):
        checkpoint.load(latest)


def test_flips_in_the_pickle_are_refused_or_change_nothing(tmp_path):
    good = checkpoint.save(sample(), tmp_path / "good.pt")
    original = checkpoint.load(good)
    start, size = record(good, "data.pkl")
    outcomes = {"refused": 0, "same": 0}
    for offset in range(0, size, 16):  # 8 bytes every 16 of the pickle
        bad = tmp_path / "bad.pt"
        bad.write_bytes(good.read_bytes())
        flip(bad, start + offset, 8)
        try:
            loaded = checkpoint.load(bad)
        except UserError:
            outcomes["refused"] += 1
            continue
        assert_same(original, {k: loaded[k] for k in original}, f"flip at {offset}")
        outcomes["same"] += 1
    assert outcomes["refused"] > 0, outcomes


def test_a_checkpoint_without_a_checksum_still_loads(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"format_version": 1, **sample()}, path)  # as rltrain wrote before checksums
    assert_same({"format_version": 1, **sample()}, checkpoint.load(path))
