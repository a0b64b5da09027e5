"""The run's console lines read right: singular and plural, thousands separators."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from rltrain.runner.messages import say_start


@pytest.mark.parametrize(("num_envs", "text"), [(1, "(1 env, device cpu)"),
                                                (8, "(8 envs, device cpu)")])
def test_start_line_counts_envs_in_words(tiny_cfg, caplog, num_envs, text):
    with caplog.at_level(logging.INFO, logger="rltrain"):
        say_start(tiny_cfg(), 100_000, num_envs, torch.device("cpu"), Path("run"))
    assert text in caplog.text and "for 100,000 env steps" in caplog.text
