"""EnvPool (`env.backend=envpool`, the optional `envpool` extra): which settings it honours, and
building it as a `SameStep` vector env.

EnvPool steps the registered ids it knows (classic control, Box2D, MuJoCo) in C++ threads; it
takes the time limit (`env.max_episode_steps`) and nothing else of gymnasium's: a wrapper, a
keyword argument, an imported module or a factory is refused in one line naming
`env.backend=gymnasium`, never silently dropped. ALE ids are not built here (their
preprocessing is gymnasium's or ale-py's: `env.backend=gymnasium`), nor ids whose EnvPool spaces
differ from gymnasium's (`twins.SPACES_DIFFER`).

EnvPool asserts int32 seeds where rltrain takes [0, 2**32 - 1] (numpy's range): `int32_seeds`
maps one onto the other.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence
from functools import lru_cache

import gymnasium as gym
import numpy as np

from rltrain.envs.config import EnvConfig
from rltrain.envs.engines.same_step import SameStep
from rltrain.envs.engines.twins import SPACES_DIFFER
from rltrain.envs.families import family_of
from rltrain.errors import UserError

INSTALL = 'pip install "rltrain[envpool]" (~926 MB with its assets)'


def envpool_installed() -> bool:
    """Whether `import envpool` would find it (nothing is imported: that takes ~1.2 s)."""
    return importlib.util.find_spec("envpool") is not None


@lru_cache(maxsize=1)
def _envpool():
    """The envpool module (start-up: ~1.2 s, paid only by a run that steps with EnvPool)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*precision lowered.*")
        import envpool

    return envpool


@lru_cache(maxsize=1)
def known_ids() -> frozenset[str]:
    """The ids EnvPool can build (imports it)."""
    return frozenset(_envpool().list_all_envs())


def unsupported(cfg: EnvConfig) -> str | None:
    """Why EnvPool cannot honour `cfg` without importing it (None: it may, if it knows the id):
    the phrase after "env.backend=envpool cannot ..."."""
    if ":" in cfg.id:
        return f"build {cfg.id} (your module's env: only registered ids)"
    if family_of(cfg.id) == "atari":
        return f"apply rltrain's Atari preprocessing to {cfg.id}"
    for field, value in (("env.wrappers", cfg.wrappers), ("env.kwargs", dict(cfg.kwargs)),
                         ("env.imports", cfg.imports)):
        if value:
            return f"take {field} (gymnasium's, set here to {_shown(value)})"
    if cfg.vectorization == "async":
        return "run env.vectorization=async (it steps its envs in its own threads)"
    return None


def _shown(value: object) -> str:
    """`value` in at most 60 characters; wrappers by their names (not their dataclass repr)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        text = ", ".join(str(getattr(v, "name", v)) for v in value)
    else:
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_envpool(cfg: EnvConfig) -> None:
    """Refuse, in one line naming `env.backend=gymnasium`, a run EnvPool cannot step as asked."""
    why = unsupported(cfg)
    if why is not None:
        raise UserError(f"env.backend=envpool cannot {why}; use env.backend=gymnasium")
    if cfg.id in SPACES_DIFFER:
        raise UserError(f"env.backend=envpool cannot step {cfg.id} as gymnasium's: EnvPool's "
                        f"{cfg.id} {SPACES_DIFFER[cfg.id]}; use env.backend=gymnasium")
    if not envpool_installed():
        raise UserError(f"env.backend=envpool needs EnvPool: {INSTALL}, or use "
                        f"env.backend=gymnasium")
    if cfg.id not in known_ids():
        raise UserError(f"EnvPool has no {cfg.id}; use env.backend=gymnasium (or an id of "
                        f"envpool.list_all_envs())")


def make_envpool(cfg: EnvConfig, num_envs: int) -> SameStep:
    """`num_envs` rows of `cfg.id` in one EnvPool (checked by `check_envpool` first)."""
    check_envpool(cfg)
    envpool = _envpool()
    extra = {} if cfg.max_episode_steps is None else {"max_episode_steps": cfg.max_episode_steps}
    threads = min(num_envs, os.cpu_count() or 1)

    def build(seeds: np.ndarray):
        with warnings.catch_warnings():  # float64 Box bounds: gymnasium warns on each space
            warnings.filterwarnings("ignore", message=".*precision lowered.*")
            engine = envpool.make_gymnasium(cfg.id, num_envs=num_envs, seed=int32_seeds(seeds),
                                            num_threads=threads, **extra)
            _ = engine.observation_space, engine.action_space  # made (and cached) quietly
            return engine

    return _float32_actions(SameStep(build, num_envs, "envpool"))


def int32_seeds(seeds: np.ndarray) -> np.ndarray:
    """EnvPool's int32 seeds of rows seeded `seeds`: [0, 2**31) as they are, [2**31, 2**32) read
    as int32 (so every seed rltrain accepts stays distinct), beyond (a row seed `s + i`)
    modulo 2**32."""
    return ((np.asarray(seeds, np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def _float32_actions(venv: SameStep) -> SameStep:
    """`venv` taking float32 actions where EnvPool declares float64 ones (MuJoCo): gymnasium's
    dtype, so the same rounded actions reach either engine."""
    space = venv.single_action_space
    if isinstance(space, gym.spaces.Box) and space.dtype == np.float64:
        venv.single_action_space = gym.spaces.Box(space.low.astype(np.float32),
                                                  space.high.astype(np.float32),
                                                  dtype=np.float32)
        venv.action_space = gym.vector.utils.batch_space(venv.single_action_space, venv.num_envs)
    return venv
