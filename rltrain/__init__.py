"""rltrain: a config-driven reinforcement-learning trainer.

Importing the package imports nothing heavy; `train`, `evaluate` and `Runner` load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Runner", "evaluate", "train"]


def __getattr__(name: str) -> Any:
    if name == "train":
        # start-up: `import rltrain` loads none of these (torch) until their first use
        from rltrain.api import train

        return train
    if name == "evaluate":
        # start-up: `import rltrain` loads none of these (torch) until their first use
        from rltrain.evaluation.command import evaluate

        return evaluate
    if name == "Runner":
        # start-up: `import rltrain` loads none of these (torch) until their first use
        from rltrain.runner.runner import Runner

        return Runner
    raise AttributeError(f"module 'rltrain' has no attribute {name!r}")
