"""A resumed run's TensorBoard file must be read after the folder's older ones: TensorBoard reads
event files in name order, and the purge event only hides the rows read before it."""

import logging
import socket
import time

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from rltrain.loggers import tensorboard
from rltrain.loggers.tensorboard import TensorBoardLogger, event_files


def older_file(tb, seconds_ahead: int):
    """Steps 1-5 of `x` in an event file named as if written `seconds_ahead` from now by a
    host that sorts after any real one: a resumed run opened now would sort before it."""
    writer = SummaryWriter(log_dir=str(tb))
    for step in range(1, 6):
        writer.add_scalar("x", float(step), step)
    writer.close()
    (path,) = event_files(tb)
    stamp = int(time.time()) + seconds_ahead
    path.rename(tb / f"events.out.tfevents.{stamp:010d}.~{socket.gethostname()}.1.0")


def read_steps(tb) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0}).Reload()
    return [(e.step, e.value) for e in acc.Scalars("x")]


def test_a_resumed_run_whose_file_would_sort_first_waits_for_a_later_name(tmp_path):
    tb = tmp_path / "tb"
    older_file(tb, seconds_ahead=1)
    logger = TensorBoardLogger(tb, purge_step=2)
    logger.log({"x": 30.0}, 3)
    logger.close()
    assert read_steps(tb) == [(1, 1.0), (2, 2.0), (3, 30.0)]  # the old 3-5 purged, no duplicates
    assert len(event_files(tb)) == 2  # the misplaced attempts left nothing behind


def test_a_file_dated_far_ahead_gives_up_with_one_warning(tmp_path, monkeypatch, caplog):
    tb = tmp_path / "tb"
    older_file(tb, seconds_ahead=3600)
    naps = []
    monkeypatch.setattr(tensorboard.time, "sleep", naps.append)
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        logger = TensorBoardLogger(tb, purge_step=2)
        logger.log({"x": 30.0}, 3)
        logger.close()
    assert len(naps) == tensorboard.OPEN_TRIES
    assert [r.message for r in caplog.records if "dated in the future" in r.message]
    assert len(event_files(tb)) == 2


@pytest.mark.parametrize("purge_step", [0, 2])
def test_a_folder_without_event_files_opens_at_once(tmp_path, monkeypatch, purge_step):
    monkeypatch.setattr(tensorboard.time, "sleep", pytest.fail)
    logger = TensorBoardLogger(tmp_path / "tb", purge_step=purge_step)
    logger.log({"x": 1.0}, 1)
    logger.close()
    assert read_steps(tmp_path / "tb") == [(1, 1.0)]
