"""Numerical guards: stop before a NaN or inf spreads into the networks or a checkpoint."""

from __future__ import annotations

import math

import torch

from rltrain.errors import NONFINITE_HINT as HINT
from rltrain.errors import TrainingError

# nan by definition, not by divergence: explained variance of constant returns (e.g. a value
# function at its fixed point on CartPole, where every return equals 1 / (1 - gamma)).
NAN_BY_DESIGN = frozenset({"train/explained_variance"})


def check_metrics(metrics: dict[str, float], step: int) -> None:
    """Raise `TrainingError` naming the first non-finite `train/*` metric (losses, grad norm)."""
    for name, value in metrics.items():
        if name in NAN_BY_DESIGN:
            continue
        if name.startswith("train/") and not math.isfinite(value):
            raise TrainingError(f"non-finite {name}={value} at step {step:,}; {HINT}")


def check_parameters(modules: dict[str, torch.nn.Module], step: int) -> None:
    """Raise `TrainingError` when a parameter of any module is NaN or inf."""
    for owner, module in modules.items():
        for name, param in module.named_parameters():
            if not torch.isfinite(param).all():
                raise TrainingError(f"non-finite parameter {owner}.{name} at step {step:,}; {HINT}")


def check_weights(algo: object, step: int) -> None:
    """Raise `TrainingError` when any network the algorithm holds (an attribute) is NaN or inf."""
    modules = {k: v for k, v in vars(algo).items() if isinstance(v, torch.nn.Module)}
    check_parameters(modules, step)
