"""One engine for a batch of seeds: `SharedRows` steps S seeds' envs as one vector env of S x N
rows (seed k's env i is row k*N + i, seeded `seed_k + i` as seed k's own env would be), and
`view(k)` is seed k's N rows as a `VecEnv` of their own, under seed k's own wrappers
(normalizers, frame stack). The batch steps every seed at once (`step`, one engine call), then
each seed's wrapper stack steps its view, which hands out that seed's rows of the result.
`envs/make.py`'s `shared_rows` builds one where a seed's own run would step EnvPool or
gymnasium's `SyncVectorEnv` (then `row_engine`: each row's env under a `RowTag`, so an env
fault names its seed).

Rows are independent and seeded per row, so a seed's rows get the transitions its own engine
would give (tests/envs/test_engines.py, tests/envs/test_rows.py). A C++ engine's state is never
saved (a resume restarts episodes). A gymnasium engine's view (`GymRowView`) shows its rows as
`GymVecEnv`'s resume state reads them (episode sums, action masks, the sub-envs), through
`GymVecEnv`'s public per-row state, so a seed's checkpoint is the one its single run writes,
and resumes exactly where that one would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rltrain.envs.engines.sync import SyncSameStep
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
        gym_rows = isinstance(self.env.venv, gym.vector.SyncVectorEnv)
        return (GymRowView if gym_rows else RowView)(self, k)

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

    def seed_of_fault(self, exc: BaseException) -> int | None:
        """The seed whose row raised `exc` (an env fault in `step` or a reset), where the engine
        tags its rows (`row_engine`); None otherwise."""
        row = next((getattr(e, ROW_ATTR) for e in (exc, exc.__cause__) if hasattr(e, ROW_ATTR)),
                   None)
        return None if row is None or not 0 <= row < self.total else self.seeds[row // self.n]

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
                if "success" in ended:
                    info["episode"]["success"] = ended["success"][mine]
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


ROW_ATTR = "rltrain_row"
"""The attribute a `RowTag` sets on an exception its env raised: the row it came from."""


class RowTag(gym.Wrapper):
    """Row `row` of a shared gymnasium engine: an exception its env raises in `step` or `reset`
    carries the row (`ROW_ATTR`), so a fault names its seed. Seeds' views hold the env under it,
    so their resume state is their single runs' (`SeedEnvs`)."""

    def __init__(self, env: gym.Env, row: int):
        super().__init__(env)
        self.row = row

    def step(self, action: Any) -> tuple:
        try:
            return self.env.step(action)
        except Exception as exc:
            setattr(exc, ROW_ATTR, self.row)
            raise

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        try:
            return self.env.reset(seed=seed, options=options)
        except Exception as exc:
            setattr(exc, ROW_ATTR, self.row)
            raise


def row_engine(make_one: Callable[[], gym.Env], rows: int) -> SyncSameStep:
    """The shared gymnasium engine: `rows` envs of `make_one` (SAME_STEP autoreset, as a
    single run's), each under its `RowTag`."""
    fns = [(lambda row=i: RowTag(make_one(), row)) for i in range(rows)]
    return SyncSameStep(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


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



def autoreset_flags(venv: gym.vector.SyncVectorEnv) -> np.ndarray:
    """`venv`'s per-row autoreset flags, the array itself. gymnasium (1.4) keeps them in the
    private `_autoreset_envs` with no public name, and `envs/snapshot.py` saves them, so a
    seed's envs show their rows of them: rltrain's one reach into a gymnasium private field
    (tests/envs/test_rows.py fails if gymnasium renames it or changes what it holds)."""
    return venv._autoreset_envs


class SeedEnvs(gym.vector.SyncVectorEnv):
    """Seed k's sub-envs of a shared engine (`rows` of `engine`, each under its `RowTag`) as the
    vector env that `envs/snapshot.py` captures and restores: the same envs, and their rows of
    the engine's autoreset flags. Nothing is built here, and nothing closed (the batch closes
    the shared engine)."""

    _engine: gym.vector.SyncVectorEnv | None = None

    def __init__(self, engine: gym.vector.SyncVectorEnv, rows: slice):
        envs = [e.env if isinstance(e, RowTag) else e for e in engine.envs[rows]]
        super().__init__([(lambda env=env: env) for env in envs], copy=engine.copy,
                         observation_mode=engine.observation_mode,
                         autoreset_mode=engine.autoreset_mode)
        self._engine, self._rows = engine, rows

    @property
    def _autoreset_envs(self) -> np.ndarray:
        return autoreset_flags(self._engine)[self._rows]

    @_autoreset_envs.setter
    def _autoreset_envs(self, value: np.ndarray) -> None:
        if self._engine is not None:  # `SyncVectorEnv.__init__` clears flags: the rows keep theirs
            autoreset_flags(self._engine)[self._rows] = value

    def close_extras(self, **kwargs: Any) -> None:
        """The batch closes the shared engine (`SharedRows.close`), not one seed."""


class GymRowView(RowView):
    """Seed k's rows of a shared gymnasium engine, with the per-row state `GymVecEnv` shows a
    resume (`envs/make.py`): `episode_return` and `episode_length` (numpy views of the
    engine's, written in place), `info_mask` (`set_info_mask`), `mask_segments` and the
    sub-envs (`venv`)."""

    def __init__(self, shared: SharedRows, k: int):
        super().__init__(shared, k)
        base, self._rows = shared.env, shared._slice(k)
        self.venv = SeedEnvs(base.venv, self._rows)
        self.episode_return = base.episode_return[self._rows]
        self.episode_length = base.episode_length[self._rows]
        self.mask_segments = base.mask_segments

    @property
    def info_mask(self) -> torch.Tensor | None:
        mask = self.shared.env.info_mask
        return None if mask is None else mask[self._rows]

    def set_info_mask(self, mask: torch.Tensor) -> None:
        """Restore these rows' info action masks (the other seeds' rows keep theirs)."""
        self.shared.env.set_info_mask(mask, self._rows)
