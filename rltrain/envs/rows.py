"""One engine for a batch of seeds: `SharedRows` steps S seeds' envs as one vector env of S x N
rows (seed k's env i is row k*N + i, seeded `seed_k + i` as seed k's own env would be), and
`view(k)` is seed k's N rows as a `VecEnv` of their own, under seed k's own wrappers
(normalizers, frame stack). The batch steps every seed at once (`step`, one engine call), then
each seed's wrapper stack steps its view, which hands out that seed's rows of the result.

Used for C++ engines (`envs/engines/`), whose rows are independent and seeded per row: a seed's
rows get the transitions its own engine would give (tests/envs/test_engines.py). Their state is
never saved (a resume restarts episodes), so nothing here saves any either.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from rltrain.envs.config import EnvConfig
from rltrain.envs.engines.choice import choose
from rltrain.envs.engines.envpool import make_envpool
from rltrain.envs.vec_env import GymVecEnv
from rltrain.obs import Obs
from rltrain.types import StepResult


def _rows(value: Any, sl: slice, total: int) -> Any:
    """`value`'s rows `sl` where it has one per row of the whole batch (`total`), recursing
    into dicts; anything else (a scalar log value) as it is."""
    if isinstance(value, dict):
        return {key: _rows(v, sl, total) for key, v in value.items()}
    if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim and len(value) == total:
        return value[sl]
    return value


class SharedRows:
    """`env` (one engine, S x N rows) shared by the seeds `seeds` (S of them, in row order)."""

    def __init__(self, env: GymVecEnv, seeds: list[int]):
        self.env, self.seeds = env, list(seeds)
        self.total = env.spec.num_envs
        self.n = self.total // len(self.seeds)
        self.spec = dataclasses.replace(env.spec, num_envs=self.n)
        self._results: dict[int, StepResult] = {}
        self._reset: tuple[int, Obs] | None = None  # (offset, obs) of the last reset, until a step

    def view(self, k: int) -> RowView:
        """Seed k's rows (`seeds[k]`) as a VecEnv."""
        return RowView(self, k)

    def reset_rows(self, k: int, seed: int | None) -> Obs:
        """Seed k's reset observations. The first view to reset resets every row, row i of
        seed j seeded `seeds[j] + (seed - seeds[k]) + i` (every seed resets alike: `seed + i`
        at the start, `seed + step` on a resume); the others take their rows of it."""
        offset = 0 if seed is None else seed - self.seeds[k]
        if self._reset is None or self._reset[0] != offset:
            row_seeds = [s + offset + i for s in self.seeds for i in range(self.n)]
            self._reset = (offset, self.env.reset(seed=row_seeds))
        return _rows(self._reset[1], self._slice(k), self.total)

    def step(self, actions: dict[int, torch.Tensor]) -> None:
        """One engine step of every row: seed s's rows take `actions[s]`; the rows of a seed
        that left the batch (its run failed) repeat a zero action, unrecorded. Each view then
        hands out its rows (`take`)."""
        like = next(iter(actions.values()))
        full = torch.cat([actions.get(s, torch.zeros_like(like)) for s in self.seeds])
        res = self.env.step(full)
        self._reset = None
        self._results = {k: self._split(res, k) for k in range(len(self.seeds))}

    def take(self, k: int) -> StepResult:
        """Seed k's rows of the last `step` (each seed takes them once)."""
        if k not in self._results:
            raise RuntimeError("a view of shared rows stepped before the batch stepped them")
        return self._results.pop(k)

    def _slice(self, k: int) -> slice:
        return slice(k * self.n, (k + 1) * self.n)

    def _split(self, res: StepResult, k: int) -> StepResult:
        sl, total = self._slice(k), self.total
        info = {key: _rows(v, sl, total) for key, v in res.info.items() if key != "episode"}
        terminated, truncated = res.terminated[sl], res.truncated[sl]
        ended = res.info.get("episode")
        if ended is not None:
            mine = (ended["index"] >= sl.start) & (ended["index"] < sl.stop)
            if mine.any():
                info["episode"] = {"index": ended["index"][mine] - sl.start,
                                   "return": ended["return"][mine],
                                   "length": ended["length"][mine],
                                   "terminated": int(terminated.sum()),
                                   "truncated": int(truncated.sum())}
        obs = _rows(res.obs, sl, total)
        return StepResult(obs=obs, reward=res.reward[sl], terminated=terminated,
                          truncated=truncated,
                          final_obs=obs if res.final_obs is res.obs
                          else _rows(res.final_obs, sl, total), info=info)

    def current_action_mask(self, k: int) -> torch.Tensor | None:
        mask = self.env.current_action_mask()
        return None if mask is None else mask[self._slice(k)]

    def close(self) -> None:
        self.env.close()


class RowView:
    """Seed k's N rows of `SharedRows` as a `VecEnv` (see the module docstring)."""

    def __init__(self, shared: SharedRows, k: int):
        self.shared, self.k = shared, k
        self.spec, self.device = shared.spec, shared.env.device
        self.engine_note = shared.env.engine_note
        self.capture_problem = getattr(shared.env.venv, "capture_problem", None)

    def reset(self, seed: int | None = None) -> Obs:
        return self.shared.reset_rows(self.k, seed)

    def step(self, action: torch.Tensor) -> StepResult:
        return self.shared.take(self.k)

    def current_action_mask(self) -> torch.Tensor | None:
        return self.shared.current_action_mask(self.k)

    def close(self) -> None:
        """The shared engine is closed by its batch (`SharedRows.close`), not by one seed."""


def shared_rows(cfg: EnvConfig, seeds: list[int], device: torch.device) -> SharedRows | None:
    """One EnvPool of `len(seeds) x cfg.num_envs` rows for a seed batch, where each seed's
    single run steps EnvPool (`env.backend=envpool`, or `auto` choosing it for `cfg.num_envs`
    envs: the engine is chosen as for one seed, so a seed in a batch and alone see the same
    transitions); None otherwise (each seed then builds its own envs)."""
    rows = len(seeds) * (cfg.num_envs or 1)
    engine = choose(cfg, cfg.num_envs or 1)
    if len(seeds) < 2 or engine.backend != "envpool":
        return None
    env = GymVecEnv(make_envpool(cfg, rows), device, name=cfg.id)
    env.engine_note = (f"{engine.note or 'envs step with EnvPool'}; the {len(seeds)} seeds "
                       f"step one engine of {len(seeds)} x {cfg.num_envs} rows")
    return SharedRows(env, seeds)
