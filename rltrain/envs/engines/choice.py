"""`env.backend=auto`: which engine steps a run's envs, from what was measured on a 2-core
machine (`benchmarks/env_engines.py` -> benchmarks/results/env_engines.md; a test keeps
`FASTER_FROM` equal to that table).

Through rltrain's adapter EnvPool steps random actions faster than gymnasium's sync vector env
from some env count on (2026-11-27: from 8 MuJoCo envs, 16 Box2D, 32 classic-control, up to 3x
at 64), but what a user waits for is training end to end, where the update takes most of the
time: under PPO (2026-11-28, the machine idle and with another process busy on one core)
EnvPool was 1.11-1.24x gymnasium's speed on Hopper from 8 envs, 1.06-1.08x on CartPole at 64,
and on HalfCheetah within 5% either way at every count. For Atari the C++ engine is ale-py's
(`engines/ale.py`): 1.7-1.9x gymnasium's Breakout with random actions from 8 envs, but the
Nature CNN's update is most of a PPO run, so end to end it was 1.06-1.11x (idle) and 1.02-1.07x
(busy core) from 8 to 64 envs: `auto` takes it from 32 envs. `auto` takes EnvPool where the table
says it is faster by at least 5% in both settings (for an id not measured, the latest of its
kind's measured ids: no MuJoCo id but Hopper's), the id's EnvPool env is checked equal to
gymnasium's (`twins.TWINS`: no Box2D id is) and it can honour the run (no wrappers, kwargs or
imports), else gymnasium; a user's env always steps with gymnasium. So a run's training and
evaluation envs, chosen apart (the evaluation has fewer envs), are the same env whichever
engine steps each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rltrain.envs.config import EnvConfig
from rltrain.envs.engines import ale
from rltrain.envs.engines.envpool import INSTALL, envpool_installed, unsupported
from rltrain.envs.engines.twins import TWINS, twin_problem
from rltrain.envs.families import family_of
from rltrain.errors import UserError

NEVER = 1 << 62
FASTER_FROM: dict[str, int] = {"CartPole-v1": 64, "classic": 64, "LunarLander-v3": NEVER,
                               "box2d": NEVER, "Hopper-v5": 8, "mujoco": NEVER,
                               "HalfCheetah-v5": NEVER, "ALE/Breakout-v5": 32, "atari": 32}
"""env id, else its kind -> the smallest env count from which the kind's C++ engine (EnvPool;
ale-py's for Atari) measured faster than gymnasium (sync) end to end (`NEVER`: at no count)."""
MEASURED: dict[str, float] = {"CartPole-v1": 1.1, "Hopper-v5": 1.2, "ALE/Breakout-v5": 1.1,
                              "classic": 1.1, "atari": 1.1}
"""The same keys -> EnvPool's steps/s over gymnasium's at `FASTER_FROM` envs (the start line)."""
HINT_FROM = 1.25
"""Without EnvPool, the start line suggests installing it (~926 MB) only where it measured at
least this much faster: not for classic control's 1.1x (`make train`'s Pendulum, 32 envs)."""


@dataclass(frozen=True)
class Engine:
    """The engine that steps a run's envs, and the start line that says why (None: nothing to
    say, the backend was named or gymnasium is the measured choice)."""

    backend: str
    note: str | None = None


def choose(cfg: EnvConfig, num_envs: int) -> Engine:
    """The engine of `cfg` at `num_envs` envs (`env.backend=auto` resolved; any other kept)."""
    if cfg.backend == "envpool" and twin_problem(cfg.id) is not None:
        return Engine("envpool", f"envs step with EnvPool's {cfg.id}, which "
                                 f"{twin_problem(cfg.id)}: training and evaluation both step "
                                 f"it (env.backend=gymnasium for gymnasium's)")
    if cfg.backend != "auto":
        return Engine(cfg.backend)
    family = family_of(cfg.id) or "classic"
    key = cfg.id if cfg.id in FASTER_FROM else family
    if family == "atari":
        return _atari(cfg, num_envs, key)
    if cfg.id not in TWINS or unsupported(cfg) is not None or \
            num_envs < FASTER_FROM.get(key, NEVER):
        return Engine("gymnasium")
    label = cfg.id if key == cfg.id else {"classic": "classic control", "box2d": "Box2D",
                                          "mujoco": "MuJoCo"}[family]
    measured = (f"measured {MEASURED[key]:.1f}x gymnasium's training speed on {label} from "
                f"{FASTER_FROM[key]} envs")
    if not envpool_installed():
        return Engine("gymnasium", f"envs step with gymnasium; EnvPool {measured}: {INSTALL}"
                      if MEASURED[key] >= HINT_FROM else None)
    return Engine("envpool", f"envs step with EnvPool (env.backend=auto: {measured}; "
                             f"env.backend=gymnasium to choose it)")


def _atari(cfg: EnvConfig, num_envs: int, key: str) -> Engine:
    """`auto` for an ALE id: ale-py's C++ engine from `FASTER_FROM` envs where it can step the
    run (the preprocessing on, no wrappers, kwargs it takes) and is installed; else gymnasium."""
    if num_envs < FASTER_FROM.get(key, NEVER) or ale.unsupported(cfg) is not None or \
            not ale.ale_vector_installed():
        return Engine("gymnasium")
    label = cfg.id if key == cfg.id else "Atari"
    return Engine("ale", f"envs step with ale-py's C++ engine (env.backend=auto: measured "
                         f"{MEASURED[key]:.1f}x gymnasium's training speed on {label} from "
                         f"{FASTER_FROM[key]} envs; env.backend=gymnasium to choose it)")


def for_evaluation(cfg: EnvConfig, video: bool = False) -> tuple[EnvConfig, str | None]:
    """The env settings `rltrain eval` builds for a run trained with `cfg`, and the line to say:
    an `env.backend=envpool` run of a checked twin evaluates on gymnasium where EnvPool is not
    installed (the same env); one of another env needs EnvPool, and records no video (videos
    record gymnasium's env). Any other backend is kept."""
    if cfg.backend != "envpool":
        return cfg, None
    problem = twin_problem(cfg.id)
    if problem is None:
        if envpool_installed():
            return cfg, None
        return (replace(cfg, backend="gymnasium"),
                f"evaluated on gymnasium's {cfg.id}: EnvPool is not installed, and its {cfg.id} "
                f"is checked equal to gymnasium's")
    if video:
        raise UserError(f"video=true records gymnasium's {cfg.id}; this run trained on EnvPool's, "
                        f"which {problem}: evaluate with video=false")
    if not envpool_installed():
        raise UserError(f"this run trained on EnvPool's {cfg.id}, which {problem}; evaluating "
                        f"it needs EnvPool: {INSTALL}")
    return cfg, None
