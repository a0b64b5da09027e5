"""The VecEnv contract, checked on a batched env of the user's own (`env.id=module:factory`
with a `num_envs` parameter): its first `reset()` and first `step()` must return tensors of the
shapes and dtypes `StepResult` names, or the run stops with one line naming the env and the
field, before a shape or dtype mismatch surfaces as a traceback deep in a network or a buffer.
Only the first calls are checked: a batched env is the fast path, and its later steps keep the
shapes of the first."""

from __future__ import annotations

from typing import Any

import torch

from rltrain.errors import EnvError
from rltrain.types import StepResult


class ContractChecked:
    """The user's batched env, unchanged, with its first `reset()` and `step()` checked."""

    def __init__(self, env: Any, name: str):
        self.env, self.name = env, name
        self.spec, self.device = env.spec, env.device
        self._stepped = False

    def __getattr__(self, attr: str) -> Any:  # everything else is the env's own
        if attr == "env":  # not set yet (a copy): no endless lookup of self.env
            raise AttributeError(attr)
        return getattr(self.env, attr)

    def reset(self, seed: int | None = None) -> Any:
        obs = self.env.reset(seed)
        self._check_obs(obs, "reset() returned")
        return obs

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if not self._stepped:
            self._check_step(res)
            self._stepped = True
        return res

    def _check_step(self, res: Any) -> None:
        if not isinstance(res, StepResult):
            self._fail("step() returned", type(res).__name__, "a StepResult")
        n = self.spec.num_envs
        self._check_obs(res.obs, "step().obs is")
        self._check_obs(res.final_obs, "step().final_obs is")
        self._check_tensor(res.reward, "step().reward", (n,), "a floating tensor", torch.is_floating_point)
        for name in ("terminated", "truncated"):
            self._check_tensor(getattr(res, name), f"step().{name}", (n,), "a bool tensor",
                               lambda t: t.dtype == torch.bool)
        if not isinstance(res.info, dict):
            self._fail("step().info is", type(res.info).__name__, "a dict")

    def _check_obs(self, obs: Any, what: str) -> None:
        n, entries = self.spec.num_envs, self.spec.obs_entries
        if not entries:
            self._check_tensor(obs, what.removesuffix(" returned").removesuffix(" is"),
                               (n, *self.spec.obs_shape), "a tensor", lambda t: True)
            return
        if not isinstance(obs, dict) or set(obs) != {e.key for e in entries}:
            keys = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            self._fail(what, keys, f"a dict of the entries {[e.key for e in entries]}")
        for e in entries:
            self._check_tensor(obs[e.key], f"{what.split()[0]}[{e.key!r}]", (n, *e.obs_shape),
                               "a tensor", lambda t: True)

    def _check_tensor(self, value: Any, what: str, shape: tuple[int, ...], kind: str,
                      ok: Any) -> None:
        if not isinstance(value, torch.Tensor):
            self._fail(f"{what} is", type(value).__name__, f"{kind} of shape {list(shape)}")
        if tuple(value.shape) != shape or not ok(value):
            self._fail(f"{what} is", f"a {value.dtype} tensor of shape {list(value.shape)}",
                       f"{kind} of shape {list(shape)}")

    def _fail(self, what: str, got: Any, wanted: str) -> None:
        raise EnvError(f"env {self.name}: {what} {got}, the VecEnv contract wants {wanted} "
                       f"(rltrain/types.py StepResult; its spec says num_envs="
                       f"{self.spec.num_envs}, obs_shape={list(self.spec.obs_shape)})")
