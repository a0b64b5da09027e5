"""`metrics.csv`: reading it never raises, and a resume keeps the good rows of a damaged file."""

from __future__ import annotations

import logging

from rltrain.loggers.csv import HEADER, CSVLogger, read_metrics

GOOD = ["step,time,name,value", "100,1.0,train/policy_loss,0.5", "200,2.0,train/policy_loss,0.25",
        "300,3.0,train/policy_loss,0.125"]


def test_read_metrics_keeps_well_formed_rows_and_counts_the_rest(tmp_path):
    path = tmp_path / "metrics.csv"
    garbage = ["garbage", "1.5,2.0,x,1", "100,1.0,,1", "abc,1.0,x,1", '"unclosed,1', "100,1,x,y"]
    path.write_bytes("\n".join([*GOOD[:2], *garbage, GOOD[2]]).encode() + b"\n\xff\x00\n")
    found = read_metrics(path)
    assert found.columns == HEADER
    assert [row[0] for row in found.rows] == ["100", "200"]
    assert found.dropped == len(garbage) + 1


def test_resume_drops_garbage_lines_and_rows_after_the_step_with_one_warning(tmp_path, caplog):
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join([GOOD[0], GOOD[1], "#!garbage!#", GOOD[2], "\x00\x00", GOOD[3],
                               "400,4.0,train/pol"]) + "\n")
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        logger = CSVLogger(path, purge_step=200)
    logger.log({"train/policy_loss": 1.0}, 250)
    logger.close()
    lines = path.read_text().splitlines()
    assert lines[:3] == GOOD[:3] and lines[3].startswith("250,") and len(lines) == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "dropped 3 malformed line(s) while resuming" in warnings[0]


def test_resume_of_a_file_with_a_foreign_header_rewrites_the_header(tmp_path, caplog):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,loss\n100,1.0,train/policy_loss,0.5\n")
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        CSVLogger(path, purge_step=100).close()
    assert path.read_text().splitlines() == GOOD[:2]
    assert "dropped 1 malformed line(s)" in caplog.text
