"""What every native batched torch env shares: autoreset, time limit, episode info, saved state.

A subclass describes one simulator as pure tensor functions over a batch of states
(`sample_state`, `observe`, `dynamics`); `NativeVecEnv` turns them into the `VecEnv` contract
with SAME_STEP autoreset, exactly like `GymVecEnv` over a gymnasium vector env: `obs` of a row
that ended is already its reset observation, `final_obs` holds the true last one, truncation
(the time limit) is reported only for rows that did not terminate, and `info["episode"]` holds
numpy arrays of the rows that ended.

Cost model: `step` runs a short, fixed sequence of batched tensor ops (no Python loop over
envs, no numpy); with few envs the cost is torch's per-op overhead, so the physics is written
with fused ops (`addcmul`, `add(alpha=)`) and few of them. Reset states are drawn for the whole
batch and chosen per row with `torch.where` only when `episode_info = False`. By default the
step makes one host sync, `done.any()`, needed to know whether an `episode` entry exists; it
pays for itself on CPU: a step in which no episode ended does no reset work, and otherwise only
the ended rows draw a reset state (`benchmarks/env_throughput.py` compares both modes).
`episode_info = False` is for a GPU run that must never wait for the host, at the price of no
`episode/*` statistics and no evaluation.
"""

from __future__ import annotations

from typing import Any

import torch

from rltrain.errors import UserError
from rltrain.types import EnvSpec, StepResult


class NativeVecEnv:
    """`num_envs` copies of one simulator stepped together on `device`.

    `dtype` is the precision of the state: float32 (default) is fast everywhere; float64 follows
    gymnasium's float64 simulators to ~1e-6 over whole episodes, where float32 rounding, which
    the dynamics amplify, reaches ~1e-4 by the end of a 200-step Pendulum episode. Observations
    and rewards are float32 either way.
    """

    state_dim: int
    obs_shape: tuple[int, ...]
    action_kind: str  # "discrete" or "box"
    action_dim: int
    default_max_episode_steps: int
    episode_info: bool = True
    """Report `info["episode"]` for ended rows (one host sync per step)."""

    def __init__(self, num_envs: int, device: torch.device | str = "cpu",
                 max_episode_steps: int | None = None, dtype: str | torch.dtype = "float32"):
        if num_envs <= 0:
            raise UserError(f"num_envs={num_envs} must be > 0")
        limit = self.default_max_episode_steps if max_episode_steps is None else max_episode_steps
        if limit <= 0:
            raise UserError(f"env.max_episode_steps={limit} must be > 0")
        self.device = torch.device(device)
        self.dtype = _float_dtype(dtype)
        self.spec = EnvSpec(self.obs_shape, self.action_kind, self.action_dim, num_envs)
        self.max_episode_steps = int(limit)
        self.generator = torch.Generator(device=self.device)
        self.generator.seed()  # like gymnasium: unseeded until reset(seed=...)
        self.state = torch.zeros(num_envs, self.state_dim, dtype=self.dtype, device=self.device)
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.episode_return = torch.zeros(num_envs, dtype=self.dtype, device=self.device)

    # ---- the simulator: defined by each env ----------------------------------------------
    def sample_state(self, n: int) -> torch.Tensor:
        """`n` fresh initial states `[n, state_dim]` (`self.dtype`) drawn from `self.generator`."""
        raise NotImplementedError

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """Observations `[n, *obs_shape]` (float32) of a batch of states: a new tensor, never a
        view of `state` (whose ended rows `step` then overwrites in place)."""
        raise NotImplementedError

    def dynamics(self, state: torch.Tensor, action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every row: (next state, reward `[n]`, terminated `[n]` bool)."""
        raise NotImplementedError

    # ---- the VecEnv contract --------------------------------------------------------------
    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset every row; `seed` reseeds the generator the reset states are drawn from."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.state = self.sample_state(self.spec.num_envs)
        self.elapsed.zero_()
        self.episode_return.zero_()
        return self.observe(self.state)

    def step(self, action: torch.Tensor) -> StepResult:
        """Advance every row; rows that ended restart at once (see the module docstring)."""
        next_state, reward, terminated = self.dynamics(self.state, action)
        self.elapsed += 1
        self.episode_return += reward
        # truncated = at the time limit and not terminated (for bools, a & ~b is a > b: one op)
        truncated = torch.gt(self.elapsed >= self.max_episode_steps, terminated)
        done = terminated | truncated
        final_obs = self.observe(next_state)
        if not self.episode_info:  # no host sync: every row draws a reset, torch.where picks
            self.state = torch.where(done.unsqueeze(1), self.sample_state(self.spec.num_envs),
                                     next_state)
            self.elapsed.masked_fill_(done, 0)
            self.episode_return.masked_fill_(done, 0.0)
            return StepResult(self.observe(self.state), reward.float(), terminated, truncated,
                              final_obs, {})
        if not bool(done.any()):  # the one host sync of a step; most steps end no episode
            self.state = next_state
            return StepResult(final_obs.clone(), reward.float(), terminated, truncated,
                              final_obs, {})
        index = done.nonzero().squeeze(1)
        info = {"episode": self._episode(index, terminated)}
        next_state[index] = self.sample_state(len(index))  # only the ended rows draw a reset
        self.state = next_state
        self.elapsed[index] = 0
        self.episode_return[index] = 0.0
        return StepResult(self.observe(self.state), reward.float(), terminated, truncated,
                          final_obs, info)

    def _episode(self, index: torch.Tensor, terminated: torch.Tensor) -> dict[str, Any]:
        """The `episode` info of the rows `index` that ended, as numpy (as `GymVecEnv` gives)."""
        n_terminated = int(terminated.sum())  # every terminated row is among the ended ones
        return {"index": index.cpu().numpy(),
                "return": self.episode_return[index].double().cpu().numpy(),
                "length": self.elapsed[index].cpu().numpy(),
                "terminated": n_terminated,
                "truncated": len(index) - n_terminated}

    def close(self) -> None:
        """Nothing to release: the state is a few tensors."""

    # ---- state access: tests against gymnasium, and exact resume --------------------------
    def get_state(self) -> torch.Tensor:
        """A copy of the simulator state `[num_envs, state_dim]`."""
        return self.state.clone()

    def set_state(self, state: Any, rows: Any = None) -> None:
        """Overwrite the simulator state of every row, or of `rows` (indices or a bool mask);
        episode counters are kept. Returns nothing; the next `step` starts from `state`."""
        value = torch.as_tensor(state, dtype=self.dtype, device=self.device)
        new = self.state.clone()
        if rows is None:
            new.copy_(value.reshape(new.shape))
        else:
            new[torch.as_tensor(rows, device=self.device)] = value
        self.state = new

    def sim_state(self) -> dict[str, torch.Tensor]:
        """Everything `load_sim_state` needs to continue exactly: plain CPU tensors."""
        return {"state": self.state.cpu().clone(), "elapsed": self.elapsed.cpu().clone(),
                "episode_return": self.episode_return.cpu().clone(),
                "generator": self.generator.get_state().clone()}

    def load_sim_state(self, saved: Any) -> bool:
        """Restore `sim_state()`, all or nothing: False (nothing changed) when `saved` is not a
        state of this env (another number of rows, missing or malformed parts)."""
        shapes = {"state": tuple(self.state.shape), "elapsed": tuple(self.elapsed.shape),
                  "episode_return": tuple(self.episode_return.shape),
                  "generator": tuple(self.generator.get_state().shape)}
        if not isinstance(saved, dict) or any(
                not isinstance(saved.get(k), torch.Tensor) or tuple(saved[k].shape) != shape
                or saved[k].is_complex() for k, shape in shapes.items()):
            return False
        if saved["generator"].dtype != torch.uint8:
            return False
        self.state = saved["state"].to(self.device, self.dtype)
        self.elapsed = saved["elapsed"].to(self.device, torch.long)
        self.episode_return = saved["episode_return"].to(self.device, self.dtype)
        self.generator.set_state(saved["generator"].cpu())
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.spec.num_envs}, device={self.device})"


def _float_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """torch.float32 or torch.float64 from a dtype or its name; `UserError` for anything else."""
    value = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if value not in (torch.float32, torch.float64):
        raise UserError(f"env.kwargs.dtype={dtype!r}: choose float32 or float64")
    return value
