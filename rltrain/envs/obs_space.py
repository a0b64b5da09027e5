"""From a gymnasium observation space to tensors: which entries an observation has (one for a
Box or a categorical space; one per leaf of a Dict or Tuple space) and how each entry's numpy
array becomes the tensor buffers and networks take (see `rltrain/obs.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rltrain.errors import EnvError, UserError
from rltrain.types import ObsEntry

SUPPORTED = ("Box, Discrete, MultiDiscrete (1-D), MultiBinary (1-D), and Dict / Tuple of "
             "these")


def array_tensor(array: Any, dtype: type, device: torch.device) -> torch.Tensor:
    """`array` (an env's batched numpy output) as a tensor of numpy `dtype` on `device`.

    Like `torch.as_tensor`, it shares the array's memory where no conversion is needed (the
    vector env returns fresh arrays every step); `torch.from_numpy` does it ~4x cheaper (an
    `[8]` array: 0.7 against 2.8 µs, five times a step). A read-only or reversed array is copied
    first, where `as_tensor` would warn or fail.
    """
    a = np.asarray(array, dtype=dtype)
    if not a.flags.writeable or min(a.strides, default=0) < 0:
        a = a.copy()
    tensor = torch.from_numpy(a)
    return tensor if device.type == "cpu" else tensor.to(device)


def categorical_space(space: gym.Space) -> tuple[np.ndarray | None, np.ndarray]:
    """(nvec, start) of a Discrete, 1-D MultiDiscrete or 1-D MultiBinary observation space (a
    MultiBinary entry is a category of 2); (None, 0) for any other space."""
    if isinstance(space, gym.spaces.Discrete):
        return np.array([int(space.n)]), np.array([int(space.start)])
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        start = getattr(space, "start", None)
        return (space.nvec.astype(np.int64),
                np.zeros(len(space.nvec), np.int64) if start is None else start.astype(np.int64))
    if isinstance(space, gym.spaces.MultiBinary) and len(np.shape(space.n)) <= 1:
        n = int(np.prod(space.n))
        return np.full(n, 2, dtype=np.int64), np.zeros(n, np.int64)
    return None, np.zeros(1, np.int64)


def is_pixels(space: gym.spaces.Box) -> bool:
    """True for uint8 observations, or any bounded to [0, 255]: pixel intensities."""
    if space.dtype == np.uint8:
        return True
    return bool(np.all(space.low == 0) and np.all(space.high == 255))


@dataclass(frozen=True)
class Leaf:
    """One entry of an observation: where it sits in the env's (nested) observation, and how
    its batched array becomes a tensor."""

    key: str
    path: tuple[Any, ...]  # dict keys / tuple indices from the observation down to the entry
    space: gym.Space
    nvec: np.ndarray | None = None  # categorical: choices per integer
    start: np.ndarray | None = None  # categorical: the space's first value per integer

    @property
    def entry(self) -> ObsEntry:
        """What the networks and buffers need to know of this entry."""
        if self.nvec is not None:
            return ObsEntry(self.key, (len(self.nvec),), obs_nvec=tuple(int(v) for v in self.nvec))
        return ObsEntry(self.key, tuple(self.space.shape), is_pixels(self.space))

    def pick(self, obs: Any) -> Any:
        """This entry of a (batched or single) observation of the whole space."""
        for step in self.path:
            obs = obs[step]
        return obs

    def tensor(self, array: np.ndarray, n: int, device: torch.device, env: str) -> torch.Tensor:
        """uint8 arrays stay uint8 (4x less memory in buffers; networks convert them on the
        device, see `nets/encoder.py`); categorical ones become int64 `[n, k]` counted from 0
        (a space's `start` subtracted, out-of-range values refused); the rest float32."""
        if self.nvec is None:
            return array_tensor(array, np.uint8 if array.dtype == np.uint8 else np.float32, device)
        index = np.asarray(array, dtype=np.int64).reshape(n, -1) - self.start
        bad = (index < 0) | (index >= self.nvec)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            where = f"entry {self.key!r} " if self.key else ""
            raise EnvError(f"env {env} returned observation {where}element {col} = "
                           f"{index[row, col] + self.start[col]} (row {row}), outside its space "
                           f"{self.space}")
        return array_tensor(index, np.int64, device)


def leaves(space: gym.Space, key: str = "", path: tuple[Any, ...] = ()) -> list[Leaf]:
    """The entries of observations of `space`: one (key "") for a Box or categorical space;
    for Dict / Tuple spaces one per leaf, keyed by its dotted path ("0", "goal", "robot.arm")."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        items = (space.spaces.items() if isinstance(space, gym.spaces.Dict)
                 else enumerate(space.spaces))
        out = [leaf for name, sub in items
               for leaf in leaves(sub, f"{key}.{name}" if key else str(name), (*path, name))]
        if not out:
            raise UserError(f"observation space {space} has no entries")
        seen = [leaf.key for leaf in out]
        twice = sorted({k for k in seen if seen.count(k) > 1})
        if twice:  # {"a.b": ..., "a": {"b": ...}}: one dict key would hold both
            raise UserError(f"observation key {twice[0]!r} names more than one entry of "
                            f"{space} (nested keys join with '.'): rename one of them")
        return out
    nvec, start = categorical_space(space)
    if nvec is not None:
        return [Leaf(key, path, space, nvec, start)]
    where = f" (entry {key!r})" if key else ""
    if isinstance(space, gym.spaces.Box) and space.shape == ():
        raise UserError(f"observation space {space}{where} is 0-dimensional: give it shape (1,) "
                        f"(and return observations as arrays of one value)")
    if isinstance(space, gym.spaces.Box):
        return [Leaf(key, path, space)]
    raise UserError(f"unsupported observation space {space}{where}: rltrain handles {SUPPORTED}")


def is_structured(space: gym.Space) -> bool:
    """Dict and Tuple spaces: observations become dicts of tensors."""
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))
