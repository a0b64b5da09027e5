"""The one switch between training and evaluation behaviour of the networks (BatchNorm's batch
statistics against its running ones, Dropout on or off): evaluation and export run a policy in
eval mode and hand it back as they found it; CrossQ (`algos/crossq.py`) runs the passes that
take batch statistics in train mode the same way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn


@contextmanager
def eval_mode(*modules: Any) -> Iterator[None]:
    """Every `nn.Module` among `modules` in eval mode inside the block, each submodule back to
    its own mode after (anything else, such as a test's plain policy object, is left alone)."""
    nets = [m for m in modules if isinstance(m, nn.Module)]
    # submodule by submodule: a module may hold parts in either mode (a frozen target net)
    before = [(sub, sub.training) for net in nets for sub in net.modules()]
    for net in nets:
        net.eval()
    try:
        yield
    finally:
        for sub, training in before:
            sub.training = training


@contextmanager
def train_mode(*modules: Any) -> Iterator[None]:
    """`eval_mode`'s twin: every `nn.Module` among `modules` in train mode inside the block
    (CrossQ's batch-statistics passes), each submodule back to its own mode after."""
    nets = [m for m in modules if isinstance(m, nn.Module)]
    before = [(sub, sub.training) for net in nets for sub in net.modules()]
    for net in nets:
        net.train()
    try:
        yield
    finally:
        for sub, training in before:
            sub.training = training
