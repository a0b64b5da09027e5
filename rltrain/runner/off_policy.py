"""The off-policy loop (DQN, DDPG, TD3, SAC): step, store in replay, take gradient steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rltrain.runner.runner import Runner


def run_off_policy(runner: Runner) -> None:
    """Not implemented until the off-policy algorithms land (issue 3)."""
    raise NotImplementedError("off-policy training arrives with the off-policy algorithms")
