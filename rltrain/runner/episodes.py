"""Episode statistics gathered from `StepResult.info["episode"]`."""

from __future__ import annotations

from collections import deque

from rltrain.types import Metrics, StepResult


class EpisodeTracker:
    """Rolling mean return/length over the last `window` episodes, plus per-period counts."""

    def __init__(self, window: int = 100):
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.terminated = 0
        self.truncated = 0

    def record(self, res: StepResult) -> None:
        """Take note of the episodes that ended in this step."""
        ep = res.info.get("episode")
        if ep is not None:
            self.returns.extend(float(r) for r in ep["return"])
            self.lengths.extend(int(n) for n in ep["length"])
            self.terminated += ep["terminated"]
            self.truncated += ep["truncated"]

    @property
    def mean_return(self) -> float | None:
        """Mean return of the recent episodes, None before the first one ends."""
        return sum(self.returns) / len(self.returns) if self.returns else None

    def metrics(self) -> Metrics:
        """`episode/*` scalars; the counts cover the period since the previous call."""
        out: Metrics = {"episode/terminated_count": float(self.terminated),
                        "episode/truncated_count": float(self.truncated)}
        if self.returns:
            out["episode/mean_reward"] = self.mean_return  # type: ignore[assignment]
            out["episode/mean_length"] = sum(self.lengths) / len(self.lengths)
        self.terminated = self.truncated = 0
        return out
