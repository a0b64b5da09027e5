"""One agent, many processes: data-parallel training under `torchrun` (PPO and A2C).

torchrun starts one process per rank and sets RANK / WORLD_SIZE / LOCAL_RANK. Each rank runs its
own envs (env i of rank r is seeded `seed + r * num_envs + i`), computes gradients on its own
rollout, and the ranks average them in one flat all-reduce per optimizer step, so parameters
stay identical. Everything that decides control flow is agreed on collectively (`any_`, `mean`),
so no rank ever waits alone in a collective. Rank 0 alone writes the run folder.

`SOLO` is the single-process stand-in: every collective is the identity, at no cost, so the
training code calls them unconditionally and a plain run is unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rltrain.errors import UserError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class World:
    """This process's place in the job: rank, world size, local rank (its device index)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes the run folder, logs, evaluates and checkpoints."""
        return self.rank == 0


def world_from_env() -> World | None:
    """The `World` torchrun describes in the environment; None outside torchrun."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        return World(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                     int(os.environ.get("LOCAL_RANK", "0")))
    except ValueError:
        raise UserError(f"RANK={os.environ['RANK']!r} / WORLD_SIZE={os.environ['WORLD_SIZE']!r} "
                        f"are not integers (set by torchrun)") from None


class Solo:
    """One process: every collective is the identity."""

    world = World()

    def average_(self, tensors: list[torch.Tensor]) -> None:
        """Average `tensors` across ranks, in place."""

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of `value` across ranks."""
        return value

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std) of the union of every rank's `x` (n - 1 denominator; one sample: std 0)."""
        # correction 0 for one sample, as ProcessGroup's max(n - 1, 1): torch would warn, give nan
        return x.mean(), x.std(correction=int(x.numel() > 1))

    def moments_many(self, xs: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """`moments` of each of `xs`, in one collective."""
        return [self.moments(x) for x in xs]

    def any_(self, flag: bool) -> bool:
        """True when `flag` is true on any rank."""
        return flag

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0 (None on the others)."""
        return [obj]

    def gather_all(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `tensor` (same shape on each), in rank order, on every rank."""
        return [tensor]

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj`, on every rank."""
        return obj

    def broadcast_(self, tensors: list[torch.Tensor]) -> None:
        """Overwrite `tensors` with rank 0's, in place (one flat broadcast)."""

    def mean_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """Each metric averaged over the ranks that report it."""
        return metrics

    def close(self) -> None:
        """Leave the job once every rank is done."""

    def abort(self) -> None:
        """Leave the job at once (this rank failed: the others are stopped by torchrun)."""


SOLO = Solo()
