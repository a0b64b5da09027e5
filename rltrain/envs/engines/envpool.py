"""EnvPool (`env.backend=envpool`, the optional `envpool` extra): which settings it honours, and
building it as a `SameStep` vector env.

EnvPool steps the registered ids it knows (classic control, Box2D, MuJoCo) in C++ threads; it
takes the time limit (`env.max_episode_steps`) and nothing else of gymnasium's: a wrapper, a
keyword argument, an imported module or a factory is refused in one line naming
`env.backend=gymnasium`, never silently dropped. ALE ids are not built here (their
preprocessing is gymnasium's or ale-py's: `env.backend=gymnasium`).
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from functools import lru_cache

import numpy as np

from rltrain.envs.config import EnvConfig
from rltrain.envs.engines.same_step import SameStep
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
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_envpool(cfg: EnvConfig) -> None:
    """Refuse, in one line naming `env.backend=gymnasium`, a run EnvPool cannot step as asked."""
    why = unsupported(cfg)
    if why is not None:
        raise UserError(f"env.backend=envpool cannot {why}; use env.backend=gymnasium")
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
            engine = envpool.make_gymnasium(cfg.id, num_envs=num_envs, seed=seeds,
                                            num_threads=threads, **extra)
            _ = engine.observation_space, engine.action_space  # made (and cached) quietly
            return engine

    return SameStep(build, num_envs, "envpool")
