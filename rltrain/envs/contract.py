"""The VecEnv contract, checked on a batched env of the user's own (`env.id=module:factory`
with a `num_envs` parameter): its first `reset()` and first `step()` must return tensors of the
shapes and dtypes `StepResult` names, or the run stops with one line naming the env and the
field, before a shape or dtype mismatch surfaces as a traceback deep in a network or a buffer.
Only the first calls are checked for shapes and dtypes: a batched env is the fast path, and its
later steps keep the shapes of the first. Every call is checked for NaN and inf in the rewards and
float observations (one host sync a step), as rltrain's gymnasium adapter
checks its envs: a non-finite value would otherwise surface updates later as a non-finite loss,
blamed on the learning rate."""

from __future__ import annotations

import math
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
        self._check_finite({"observation": obs}, "reset()")
        return obs

    def step(self, action: torch.Tensor) -> StepResult:
        res = self.env.step(action)
        if not self._stepped:
            self._check_step(res)
            self._stepped = True
        values = {"reward": res.reward, "observation": res.obs}
        if res.final_obs is not res.obs:  # often the same tensor: no second reduction
            values["final observation"] = res.final_obs
        self._check_finite(values, "step()")
        return res

    def _check_finite(self, values: dict[str, Any], call: str) -> None:
        """Refuse NaN/inf in `values` (tensors, or dicts of them: a Dict observation's entries)
        with one line naming the value, its entry and its index. The fast test is the sum of
        every value (finite unless one is not, or the sum overflows): one host sync, ~13 µs a
        step on this CPU against ~40 µs for `isfinite` on each; only a non-finite sum pays for
        the exact search, which also clears an overflow."""
        named = [(what, key, t) for what, value in values.items()
                 for key, t in (value.items() if isinstance(value, dict) else [(None, value)])
                 if torch.is_floating_point(t)]
        if not named:
            return
        total = named[0][2].sum(dtype=torch.float32)  # float16 pixels would overflow a sum of
        for _, _, t in named[1:]:                     # their own dtype on every step
            total = total + t.sum(dtype=torch.float32)
        if math.isfinite(total.item()):
            return
        for what, key, t in named:
            if not bool(torch.isfinite(t).all()):
                bad = tuple(int(i) for i in torch.nonzero(~torch.isfinite(t))[0])
                entry = f" entry {key!r}" if key is not None else ""
                raise EnvError(f"env {self.name}: {call} returned a non-finite {what}{entry} "
                               f"({t[bad].item()} at index {bad}); the env is at fault, not the "
                               f"learning rate")

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
