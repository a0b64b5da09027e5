"""The `VecEnv` protocol and its gymnasium adapter.

Every edge case of episode boundaries is solved here, once: gymnasium vector envs run in
SAME_STEP autoreset mode, so `obs` of an ended row is already the reset observation and the
true last observation arrives in `info["final_obs"]`; the adapter returns it as `final_obs`.
Buffers use `final_obs` as the next observation, so no transition ever spans a reset.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from rltrain.envs.action_space import action_nvec, describe_action_space
from rltrain.envs.extras import episode_success, vector_extras
from rltrain.envs.masks import MASK_KEY, MASKABLE, to_mask
from rltrain.envs.obs_bounds import BoundsWatch
from rltrain.envs.obs_space import array_tensor, is_structured, leaves
from rltrain.errors import EnvError, TrainingError, UserError
from rltrain.obs import Obs
from rltrain.types import EnvSpec, StepResult


class VecEnv(Protocol):
    """A batch of environments with torch tensors in and out, on the training device.

    Implemented by `GymVecEnv` (gymnasium), the native torch envs of `envs/native/`, and any
    user class built by a batched factory (`env.id=module:factory`, see `envs/custom.py`).

    - `reset(seed)` -> obs `[N, *obs_shape]` float32 (uint8 for uint8 pixel spaces).
    - `step(action)`: discrete actions are long `[N]`, Box actions `[N, dim]` in [-1, 1] (the env
      rescales them). Returns `StepResult`: `reward` float32 `[N]`, `terminated` / `truncated`
      bool `[N]` (never both), rows that ended already reset in `obs` (SAME_STEP autoreset),
      their true last observation in `final_obs`.
    - `info` may hold `"episode"`: `{"index", "return", "length"}` numpy arrays over the rows
      that ended this step and int `"terminated"` / `"truncated"` counts (episode statistics
      and evaluation read it); `"reward_components"`: `{name: [N]}` this step's reward parts;
      `"log"`: `{key: scalar or [N]}`.
    - Optional: `sim_state() -> dict` of tensors and `load_sim_state(dict) -> bool`, so that
      `resume=` continues mid-episode exactly (`envs/make.py`, `resume_state`).
    """

    spec: EnvSpec
    device: torch.device

    def reset(self, seed: int | None = None) -> torch.Tensor: ...

    def step(self, action: torch.Tensor) -> StepResult: ...

    def close(self) -> None: ...


def _has_method(venv: gym.vector.VectorEnv, name: str) -> bool:
    """True when every sub-env has a method `name`, through its wrappers (asked without calling
    it: a sync env's first env is looked at; async workers answer `has_wrapper_attr`)."""
    envs = getattr(venv, "envs", None)
    try:
        if envs:
            return envs[0].has_wrapper_attr(name) and callable(envs[0].get_wrapper_attr(name))
        return all(bool(has) for has in venv.call("has_wrapper_attr", name))
    except Exception:  # noqa: BLE001 - an env too old to answer is an env without masks
        return False


class GymVecEnv:
    """Adapts a gymnasium `VectorEnv` (SAME_STEP autoreset) to the `VecEnv` contract.

    Box actions: algorithms act in [-1, 1]; `to_env_action` is the single place that clips and
    rescales them to the env's bounds (unbounded dimensions pass through unchanged).
    Raw episode returns and lengths are tracked here, before any reward scaling, and reported in
    `info["episode"]` for the rows that ended. The envs' `reward_components` and `log` infos,
    and the top-level info keys named in `log_keys`, are forwarded (see `envs/extras.py`).

    Per-row state that a resume saves and restores (`envs/make.py`) and that a seed's rows of a
    shared engine show as their own (`envs/rows.py`) is public: `episode_return` and
    `episode_length` (numpy `[N]`, written in place), `info_mask` (the `info["action_mask"]` of
    the current observations, None until an env gives one; `set_info_mask` restores rows of it),
    `mask_segments` (one mask width per action dimension) and `leaves` (the observation entries).
    """

    log_keys: tuple[str, ...] = ()
    """Top-level info keys forwarded as `info["log"][key]` (set from `logger.extra_log_keys`)."""
    info_keys: tuple[str, ...] = ()
    """Per-env info keys (`lives`) forwarded as `info["env_info"][key]`, float64 `[N]`: each
    row's value this step (for a row that ended, its reset info), NaN where a row gave none.
    `reset()` keeps the same of its reset info in `reset_info` (VecEnv wrappers read them)."""

    engine_note: str | None = None
    """The start line on the engine that steps these envs (`engines/choice.py`), if any."""

    def __init__(self, venv: gym.vector.VectorEnv, device: torch.device | str = "cpu",
                 name: str = "env"):
        self.venv, self.name = venv, name
        self.device = torch.device(device)
        obs_space = venv.single_observation_space
        kind, dim = describe_action_space(venv.single_action_space)
        nvec = action_nvec(venv.single_action_space)
        self.leaves = leaves(obs_space)
        self._bounds = BoundsWatch(self.leaves, name)  # warns of a wrong Box space, once
        self._structured = is_structured(obs_space)
        if self._structured:  # Dict / Tuple: one tensor per entry, in a dict
            self.spec = EnvSpec((), kind, dim, venv.num_envs, action_nvec=nvec,
                                obs_entries=tuple(leaf.entry for leaf in self.leaves))
        else:  # Box, or Discrete / MultiDiscrete / MultiBinary: int64 [k] entries
            entry = self.leaves[0].entry
            self.spec = EnvSpec(entry.obs_shape, kind, dim, venv.num_envs, entry.pixels,
                                action_nvec=nvec, obs_nvec=entry.obs_nvec)
        n = venv.num_envs
        self.episode_return = np.zeros(n, dtype=np.float64)
        self.episode_length = np.zeros(n, dtype=np.int64)
        # invalid-action masks (Discrete only, see envs/masks.py): a method of the envs, or infos
        # Discrete: one bool per action; MultiDiscrete: the dimensions' masks concatenated
        # (sb3-contrib's convention), each dimension needing one valid choice
        self.mask_segments = nvec if kind == "multi_discrete" else (dim,)
        self._mask_method = kind in MASKABLE and _has_method(venv, "action_masks")
        if kind not in MASKABLE and _has_method(venv, "action_masks"):
            raise UserError(f"env {name} has action_masks(): invalid-action masks work with "
                            f"Discrete and MultiDiscrete actions, not "
                            f"{type(venv.single_action_space).__name__}")
        self.info_mask: torch.Tensor | None = None
        if kind == "box":
            low = venv.single_action_space.low.astype(np.float64)
            high = venv.single_action_space.high.astype(np.float64)
            self._bounded = np.isfinite(low) & np.isfinite(high)
            self._low = np.where(self._bounded, low, 0.0)
            self._half_range = np.where(self._bounded, (high - low) / 2.0, 1.0)
            self._all_bounded = bool(self._bounded.all())
        space = venv.single_action_space
        self._action_start = int(space.start) if isinstance(space, gym.spaces.Discrete) else 0

    def _obs(self, arrays: list[np.ndarray]) -> Obs:
        """The observation tensor(s) of the entries' batched `arrays` (see `Leaf.tensor`): one
        tensor, or a dict of them for Dict / Tuple spaces."""
        n, device = self.spec.num_envs, self.device
        tensors = [leaf.tensor(a, n, device, self.name)
                   for leaf, a in zip(self.leaves, arrays, strict=True)]
        if self._structured:
            return {leaf.key: t for leaf, t in zip(self.leaves, tensors, strict=True)}
        return tensors[0]

    def _final_arrays(self, arrays: list[np.ndarray], info: dict[str, Any]) -> list[np.ndarray]:
        """The entries' arrays with each ended row's true last observation in place of its
        reset observation (SAME_STEP autoreset keeps those in `info["final_obs"]`)."""
        out = [np.array(a, copy=True) for a in arrays]
        for i in np.flatnonzero(info["_final_obs"]):
            for leaf, a in zip(self.leaves, out, strict=True):
                a[i] = leaf.pick(info["final_obs"][i])
        return out

    def to_env_action(self, action: torch.Tensor) -> np.ndarray:
        """Map the algorithm's action to what the env accepts (see class docstring)."""
        a = action.detach().cpu().numpy()
        kind, space = self.spec.action_kind, self.venv.single_action_space
        if kind == "discrete":  # counted from the space's start (Discrete(n, start=k))
            return a.astype(np.int64).reshape(len(a)) + self._action_start
        if kind == "multi_discrete":  # [N, k] choices, each counted from the space's start
            start = getattr(space, "start", None)
            a = a.astype(np.int64).reshape(len(a), -1)  # len(a): export checks send batches
            return (a + start if start is not None else a).astype(space.dtype)
        if kind == "multi_binary":
            return a.reshape(len(a), *np.shape(space.sample())).astype(space.dtype)
        a = a.astype(np.float64)
        scaled = self._low + (np.clip(a, -1.0, 1.0) + 1.0) * self._half_range
        if not self._all_bounded:
            scaled = np.where(self._bounded, scaled, a)
        return scaled.astype(space.dtype)

    def reset(self, seed: int | None = None) -> Obs:
        """Reset every env; `seed` seeds env i with `seed + i`."""
        try:
            obs, info = self.venv.reset(seed=seed)
        except (UserError, TrainingError):
            raise
        except Exception as exc:  # the user's env code: one line naming it (see EnvError)
            raise self._fault("reset", exc) from exc
        arrays = [leaf.pick(obs) for leaf in self.leaves]
        self._check_finite(arrays, np.zeros(1))
        self._bounds.reset(arrays)
        self.episode_return[:] = 0.0
        self.episode_length[:] = 0
        self.reset_info = self._env_info(info)
        self.info_mask = self._mask_from_info(info, None)
        return self._obs(arrays)

    def step(self, action: torch.Tensor) -> StepResult:
        """Step all envs; see `StepResult` for the meaning of `obs` and `final_obs`."""
        try:
            obs, reward, terminated, truncated, info = self.venv.step(self.to_env_action(action))
        except (UserError, TrainingError):
            raise
        except Exception as exc:  # the user's env code: one line naming it (see EnvError)
            raise self._fault("step", exc) from exc
        arrays = [leaf.pick(obs) for leaf in self.leaves]
        self._check_finite(arrays, reward)
        self._bounds.step(arrays)
        self.info_mask = self._mask_from_info(info, self.info_mask)
        out_info: dict[str, Any] = vector_extras(info, self.log_keys)
        if self.info_keys:
            out_info["env_info"] = self._env_info(info)
        self.episode_return += reward
        self.episode_length += 1
        done = terminated | truncated
        if done.any():
            out_info["episode"] = {
                "index": np.flatnonzero(done),
                "return": self.episode_return[done].copy(),
                "length": self.episode_length[done].copy(),
                "terminated": int(terminated.sum()),
                "truncated": int((truncated & ~terminated).sum()),
            }
            success = episode_success(info, done)
            if success is not None:  # a goal env's `is_success` at each episode's last step
                out_info["episode"]["success"] = success
            self.episode_return[done] = 0.0
            self.episode_length[done] = 0
        obs = self._obs(arrays)
        return StepResult(
            obs=obs,
            reward=array_tensor(reward, np.float32, self.device),
            terminated=array_tensor(terminated, np.bool_, self.device),
            truncated=array_tensor(truncated & ~terminated, np.bool_, self.device),
            # no row ended: the same tensor (on a GPU one copy to the device fewer a step; on
            # the CPU both already shared the env's arrays)
            final_obs=obs if "final_obs" not in info else self._obs(self._final_arrays(arrays, info)),
            info=out_info,
        )

    def current_action_mask(self) -> torch.Tensor | None:
        """Bool `[N, n]` valid actions at the current observations (MultiDiscrete: `[N,
        sum(nvec)]`, the dimensions side by side); None for an unmasked env."""
        if self._mask_method:
            try:
                masks = self.venv.call("action_masks")
            except Exception as exc:  # the user's env code: one line naming it
                raise self._fault("action_masks", exc) from exc
            return to_mask(np.stack([np.asarray(m) for m in masks]), self.spec.num_envs,
                           self.mask_segments, self.name, self.device)
        return self.info_mask

    def set_info_mask(self, mask: torch.Tensor, rows: slice = slice(None)) -> None:
        """Rows `rows` of `info_mask` (a resume's); every other row keeps its own (all valid)."""
        full = torch.ones((self.spec.num_envs, sum(self.mask_segments)), dtype=torch.bool,
                          device=self.device) if self.info_mask is None else self.info_mask.clone()
        full[rows] = mask.to(self.device, torch.bool)  # a new tensor: a caller may hold the old
        self.info_mask = full

    def _mask_from_info(self, info: dict[str, Any], previous: torch.Tensor | None,
                        ) -> torch.Tensor | None:
        """`info["action_mask"]` as a bool `[N, n]` tensor; rows that gave none this time keep
        `previous` (every action valid when there is none)."""
        if MASK_KEY not in info:
            return previous
        if self.spec.action_kind not in MASKABLE:
            raise UserError(f"env {self.name} gives info[{MASK_KEY!r}]: invalid-action masks "
                            f"work with Discrete and MultiDiscrete actions, not "
                            f"{type(self.venv.single_action_space).__name__}")
        n, k = self.spec.num_envs, self.mask_segments
        values = to_mask(info[MASK_KEY], n, k, self.name, self.device, check_rows=False)
        given = torch.as_tensor(np.asarray(info.get("_" + MASK_KEY, np.ones(n, dtype=bool)),
                                           dtype=bool), device=self.device).reshape(n, 1)
        fallback = previous if previous is not None else torch.ones_like(values)
        return to_mask(torch.where(given, values, fallback), n, k, self.name, self.device)

    def _env_info(self, info: dict[str, Any]) -> dict[str, np.ndarray]:
        """The `info_keys` columns of a vector `info` (see `info_keys`)."""
        out = {}
        for key in self.info_keys:
            if key in info:
                values = np.asarray(info[key], dtype=np.float64)
                out[key] = np.where(info.get("_" + key, True), values, np.nan)
        return out

    def _fault(self, call: str, exc: Exception) -> EnvError:
        """One line for an exception the env raised in `call` (RLTRAIN_DEBUG=1: its traceback)."""
        text = str(exc).strip().splitlines()
        message = f"env {self.name} raised {type(exc).__name__} in {call}(): {text[0] if text else ''}"
        if "broadcast" in message or "shape" in message:  # SyncVectorEnv copying a wrong obs
            message += (f" (its observations must match observation_space "
                        f"{self.venv.single_observation_space})")
        elif isinstance(exc, ValueError) and "values to unpack" in message:  # the old gym API
            message += (" (gymnasium's API: reset() returns (obs, info), step() returns (obs, "
                        "reward, terminated, truncated, info))")
        return EnvError(message[:400])

    def _check_finite(self, arrays: list[np.ndarray], reward: np.ndarray) -> None:
        """Refuse NaN/inf from the env before it reaches a buffer, a normalizer or a network."""
        if not np.isfinite(reward).all():
            row = int(np.flatnonzero(~np.isfinite(reward))[0])
            none = ": a reward of None reads as nan" if np.isnan(reward[row]) else ""
            raise EnvError(f"env {self.name} returned a non-finite reward ({reward[row]}, row "
                           f"{row}{none}); the env is at fault, not the learning rate")
        for leaf, obs in zip(self.leaves, arrays, strict=True):
            obs = np.asarray(obs)
            if obs.dtype.kind == "f" and not np.isfinite(obs).all():
                bad = np.argwhere(~np.isfinite(obs))[0]
                where = f" entry {leaf.key!r}" if leaf.key else ""
                raise EnvError(f"env {self.name} returned a non-finite observation{where} "
                               f"({obs[tuple(bad)]} at index {tuple(int(i) for i in bad)}); the "
                               f"env is at fault, not the learning rate")

    def close(self) -> None:
        """Close the underlying environments."""
        self.venv.close()
