"""Episode statistics and env extras gathered from `StepResult.info`.

The info contract (any `VecEnv`): `"episode"` describes the rows that ended this step (index,
return, length, terminated/truncated counts); `"reward_components"` maps a name to this step's
per-row reward part (`[N]` tensor or array); `"log"` maps a key to a scalar or an `[N]` value.
Components are summed per row over each episode (the step that ends an episode still belongs to
it) and logged as `reward/<name>`, the mean over the episodes that ended since the last log;
`log` values and the top-level keys named in `logger.extra_log_keys` become `extra/<key>`, the
mean of the values seen since the last log. Anything non-numeric, or with more values than
there are envs (an observation, an image), is never logged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from rltrain.types import Metrics, StepResult


class EpisodeTracker:
    """Rolling mean return/length (and a goal env's success rate) over the last `window`
    episodes, per-period counts, extras."""

    def __init__(self, window: int = 100, extra_keys: Iterable[str] = ()):
        self.returns: deque[float] = deque(maxlen=window)
        self.lengths: deque[int] = deque(maxlen=window)
        self.successes: deque[float] = deque(maxlen=window)  # a goal env's `is_success`, 0 or 1
        self.terminated = 0
        self.truncated = 0
        self.extra_keys = tuple(extra_keys)
        self._running: dict[str, Any] = {}  # component -> [N] sums of the episodes under way
        self._ended: dict[str, Any] = {}  # component -> sum over episodes ended since last log
        self._ended_count = 0  # episodes ended since the last log (while components exist)
        self._extra_sum: dict[str, Any] = {}
        self._extra_count: dict[str, int] = {}
        self._restored: dict[str, list[float]] = {}  # running sums from a checkpoint

    def record(self, res: StepResult) -> None:
        """Take note of this step's reward components, extras and ended episodes."""
        info = res.info
        if not info:  # the common case: nothing to do (called every vector step)
            return
        components = info.get("reward_components")
        if components:
            self._add_components(components, res.reward.shape[0])
        ep = info.get("episode")
        if ep is not None:
            self.returns.extend(float(r) for r in ep["return"])
            self.lengths.extend(int(n) for n in ep["length"])
            if "success" in ep:
                self.successes.extend(float(v) for v in ep["success"] if v == v)  # not NaN
            self.terminated += ep["terminated"]
            self.truncated += ep["truncated"]
            if self._running:
                self._end_episodes(ep["index"])
        extras = info.get("log")
        if extras:
            for key, value in extras.items():
                self._add_extra(str(key), value, res.reward.shape[0])
        for key in self.extra_keys:
            if key in info:
                self._add_extra(key, info[key], res.reward.shape[0])

    def _add_components(self, components: dict[str, Any], n: int) -> None:
        for name, value in components.items():
            running = self._running.get(name)
            if running is None:
                running = self._running[name] = _zeros(value, n)
                saved = self._restored.pop(name, None)
                if saved is not None and len(saved) == n:
                    running[:] = _like(saved, running)
            running += _like(value, running)

    def _end_episodes(self, index: Any) -> None:
        """Move the sums of the rows that ended into the per-period totals and restart them."""
        for name, running in self._running.items():
            rows = _like(index, running, as_index=True)
            self._ended[name] = self._ended.get(name, 0.0) + running[rows].sum()
            running[rows] = 0
        self._ended_count += len(index)

    def _add_extra(self, key: str, value: Any, n: int) -> None:
        total, count = _sum_numeric(value, n)
        if count:
            self._extra_sum[key] = self._extra_sum.get(key, 0.0) + total
            self._extra_count[key] = self._extra_count.get(key, 0) + count

    @property
    def mean_return(self) -> float | None:
        """Mean return of the recent episodes, None before the first one ends."""
        return sum(self.returns) / len(self.returns) if self.returns else None

    def metrics(self) -> Metrics:
        """`episode/*`, `reward/*` and `extra/*` scalars; all but the rolling episode means cover
        the period since the previous call."""
        out: Metrics = {"episode/terminated_count": float(self.terminated),
                        "episode/truncated_count": float(self.truncated)}
        if self.returns:
            out["episode/mean_reward"] = self.mean_return  # type: ignore[assignment]
            out["episode/mean_length"] = sum(self.lengths) / len(self.lengths)
        if self.successes:
            out["episode/success_rate"] = sum(self.successes) / len(self.successes)
        self.terminated = self.truncated = 0
        if self._ended_count:
            for name, total in self._ended.items():
                out[f"reward/{name}"] = float(total) / self._ended_count
            self._ended, self._ended_count = {}, 0
        for key, total in self._extra_sum.items():
            out[f"extra/{key}"] = float(total) / self._extra_count[key]
        self._extra_sum, self._extra_count = {}, {}
        return out

    def state_dict(self) -> dict[str, Any]:
        """Plain-data state of the components and extras (for checkpoints; rows as lists)."""
        return {"running": {k: _to_list(v) for k, v in self._running.items()},
                "ended": {k: float(v) for k, v in self._ended.items()},
                "ended_count": self._ended_count,
                "extra_sum": {k: float(v) for k, v in self._extra_sum.items()},
                "extra_count": dict(self._extra_count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` (running sums are reloaded when their component next appears)."""
        self._running, self._restored = {}, {k: list(v) for k, v in state["running"].items()}
        self._ended = dict(state["ended"])
        self._ended_count = int(state["ended_count"])
        self._extra_sum = dict(state["extra_sum"])
        self._extra_count = dict(state["extra_count"])


def _zeros(value: Any, n: int) -> Any:
    """Per-row float accumulator matching `value`'s kind (a torch tensor stays on its device)."""
    if isinstance(value, torch.Tensor):
        dtype = value.dtype if value.is_floating_point() else torch.float32
        return torch.zeros(n, dtype=dtype, device=value.device)
    return np.zeros(n, dtype=np.float64)


def _like(value: Any, like: Any, as_index: bool = False) -> Any:
    """`value` as the same kind (torch or numpy) as `like`, so in-place updates stay cheap."""
    if isinstance(like, torch.Tensor):
        if isinstance(value, torch.Tensor):
            return value.to(like.device) if value.device != like.device else value
        return torch.as_tensor(value, device=like.device,
                               dtype=torch.long if as_index else like.dtype)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def _sum_numeric(value: Any, n: int) -> tuple[Any, int]:
    """(sum, count) of a numeric scalar or of at most `n` numbers; (0, 0) for anything else."""
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return float(value), 1
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.numel() > n:
            return 0.0, 0
        return value.detach().sum(dtype=torch.float64), value.numel()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.size <= n:
        return float(value.sum(dtype=np.float64)), value.size
    return 0.0, 0


def _to_list(value: Any) -> list[float]:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().tolist()
    return np.asarray(value, dtype=np.float64).tolist()
