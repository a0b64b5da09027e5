"""Small pieces the Runner builds a run from: device, seeds, run folder, callbacks, LoopContext."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain.algos import compiled
from rltrain.checkpoint.format import plain_problem
from rltrain.checkpoint.run_dir import claim_default_run_dir
from rltrain.config.schema import TrainConfig
from rltrain.envs.extras import set_log_keys
from rltrain.envs.make import resume_state
from rltrain.envs.vec_env import VecEnv
from rltrain.errors import EnvError, TrainingError, UserError
from rltrain.parallel.world import SOLO, Solo
from rltrain.runner.callbacks import Callback, Callbacks, LoopState
from rltrain.runner.context import LoopContext
from rltrain.runner.episode_stats import EpisodeTracker
from rltrain.runner.off_policy import make_replay
from rltrain.runner.timing import SectionTimer
from rltrain.text import first_line

log = logging.getLogger("rltrain")


def resolve_device(name: str) -> torch.device:
    """`auto` picks cuda when available; anything else is passed to torch."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_data_parallel(algo: str, family: str, ranks: int) -> None:
    """Refuse, in one line, an off-policy algorithm under torchrun with more than one rank."""
    if ranks > 1 and family != "on_policy":
        raise UserError(
            f"algo={algo} is off-policy: rltrain trains it in one process (its replay and its "
            f"gradient steps per env step do not split across ranks); under torchrun use PPO or "
            f"A2C, or run several {algo} runs at once with a sweep launcher "
            f"(hydra/launcher=joblib, submitit or ray)")


def planned_updates(cfg: TrainConfig) -> int:
    """The gradient steps an off-policy run takes over its budget (0 for on-policy ones)."""
    algo = cfg.algo
    if not hasattr(algo, "gradient_steps"):
        return 0
    iterations = max(0, int(cfg.total_timesteps) - algo.learning_starts) // cfg.env.num_envs
    return iterations // algo.train_freq * algo.gradient_steps


def compile_update(cfg: TrainConfig, algo: Any, device: torch.device, quiet: bool = False) -> None:
    """Run `algo`'s update compiled where `cfg.compile` says (`algos/compiled.py`), saying which
    on the console (`compile=auto` on an algorithm without a compiled update says nothing)."""
    on, reason = compiled.choose(cfg.compile, algo, device, planned_updates(cfg))
    if on:
        compiled.use(algo, cfg.compile_cache)
    if quiet or (not on and cfg.compile == "auto" and compiled.why_not(algo, device)):
        return
    if on:
        log.info("compile: the update is compiled (%s; the first compile takes ~20-60 s, "
                 "cached in %s); compile=false turns it off", reason,
                 cfg.compile_cache or compiled.default_cache_dir())
    elif cfg.compile != "false":
        log.info("compile: the update runs eagerly (%s)", reason)


def default_run_dir() -> Path:
    """A new `outputs/<YYYY-MM-DD>/<HH-MM-SS>[-k]` in the current folder (the Hydra layout),
    claimed: runs started within one second get `-1`, `-2`... as on the command line. Absolute,
    so that a chdir of the caller's during the run does not move where it writes."""
    return claim_default_run_dir().absolute()


def build_callbacks(by_event: dict[str, list[Callback]] | None) -> Callbacks:
    """`Callbacks` holding `{event: [fn, ...]}`, in order (an unknown event is a `UserError`)."""
    callbacks = Callbacks()
    for event, fns in (by_event or {}).items():
        for fn in fns:
            callbacks.add(event, fn)
    return callbacks


def build_context(cfg: TrainConfig, off_policy: bool, env: VecEnv, algo: Any, device: torch.device,
                  fire: Callable[[str], None], end_iteration: Callable[[], None],
                  collective: Solo = SOLO) -> LoopContext:
    """A fresh run's LoopContext: step 0, no episodes yet, the replay buffer (off-policy), the
    first observation (reset with `cfg.seed`; rank r of a torchrun job with
    `cfg.seed + r * num_envs`, so that env i of rank r gets seed + r * num_envs + i)."""
    episodes = EpisodeTracker(extra_keys=cfg.logger.extra_log_keys)
    set_log_keys(env, cfg.logger.extra_log_keys)
    obs = env.reset(seed=cfg.seed + collective.world.rank * env.spec.num_envs)
    dtypes = {k: t.dtype for k, t in obs.items()} if isinstance(obs, dict) else obs.dtype
    replay = make_replay(env.spec, cfg.algo, device, dtypes, env) if off_policy else None
    return LoopContext(env, algo, cfg.algo, LoopState(total_timesteps=int(cfg.total_timesteps)),
                       episodes, SectionTimer(), device, obs=obs, fire=fire, collective=collective,
                       end_iteration=end_iteration, replay=replay)


STATE_TYPES = ("numbers, str, None, numeric numpy values, tensors, and lists, tuples and "
               "str-keyed dicts of them")


def check_env_state(env: VecEnv, name: str) -> None:
    """Take the env state every checkpoint stores (`resume_state`: normalizer statistics and,
    where it can be saved whole, the simulator's, e.g. the user's `sim_state()`) once before
    the first step: a `sim_state()` that raises, or returns what a checkpoint cannot hold, stops
    the run now in one line, not at its first checkpoint, hours in."""
    try:
        state = resume_state(env)
    except (UserError, TrainingError):
        raise
    except Exception as exc:  # the user's sim_state()
        raise EnvError(f"env {name}: taking its state for checkpoints failed: "
                       f"{type(exc).__name__}: {first_line(exc)}") from exc
    problem = plain_problem(state)
    if problem is not None:
        raise UserError(f"env {name}: checkpoints cannot hold its state ({problem}); "
                        f"sim_state() must return {STATE_TYPES}")


def set_once(obj: object, name: str, value: Any, fixed: tuple[str, ...]) -> None:
    """`obj.<name> = value`, refused for a name in `fixed` that is already set: what configures
    a Runner (or a batch) is given to its constructor, never flipped after it was built."""
    if name in fixed and name in vars(obj):
        kind = type(obj).__name__
        raise AttributeError(f"{kind}.{name} is set once, by {kind}({name}=...); build another "
                             f"{kind} to change it")
    object.__setattr__(obj, name, value)
