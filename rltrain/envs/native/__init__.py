"""Native batched torch envs (`env.backend=torch`): the whole batch steps on the training device.

`NATIVE_ENVS` maps the gymnasium ids that have a native twin to its class; the dynamics equal
gymnasium's (tests/envs/test_native_envs.py checks them step for step).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from rltrain.envs.native.base import NativeVecEnv
from rltrain.envs.native.cartpole import CartPole
from rltrain.envs.native.pendulum import Pendulum
from rltrain.errors import UserError

NATIVE_ENVS: dict[str, type[NativeVecEnv]] = {"CartPole-v1": CartPole, "Pendulum-v1": Pendulum}


def native_class(env_id: str) -> type[NativeVecEnv]:
    """The native class of `env_id`; a one-line `UserError` naming the available ids otherwise."""
    if env_id not in NATIVE_ENVS:
        raise UserError(f"env.backend=torch has no native {env_id!r}: available are "
                        f"{', '.join(NATIVE_ENVS)} (use env.backend=gymnasium for other envs)")
    return NATIVE_ENVS[env_id]


def check_native_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Refuse `env.kwargs` the native env does not take (its own keywords, e.g. CartPole's
    `sutton_barto_reward`, Pendulum's `g`), naming the ones it does."""
    cls = native_class(env_id)
    own = [p for p in inspect.signature(cls).parameters
           if p not in ("num_envs", "device", "max_episode_steps")]
    unknown = sorted(set(kwargs) - set(own))
    if unknown:
        raise UserError(f"env.kwargs.{unknown[0]}: the native {env_id} takes "
                        f"{', '.join(own) if own else 'no keyword arguments'}")


def make_native(env_id: str, num_envs: int, device: torch.device | str = "cpu",
                max_episode_steps: int | None = None, **kwargs: Any) -> NativeVecEnv:
    """Build the native twin of `env_id` with `num_envs` rows on `device`."""
    check_native_kwargs(env_id, kwargs)
    return native_class(env_id)(num_envs, device, max_episode_steps, **kwargs)


__all__ = ["NATIVE_ENVS", "CartPole", "NativeVecEnv", "Pendulum", "check_native_kwargs",
           "make_native", "native_class"]
