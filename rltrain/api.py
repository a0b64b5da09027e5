"""Python entry point: `rltrain.train(overrides)` composes the config exactly as the CLI does
(`rltrain.config.compose.compose_train_config`) and runs it through the same launch functions
(`rltrain/launch.py`). What is the API's own stays here: the caller's process left as it was
found (`guest.py`), the folder a run from Python writes to, the result returned as a dict and a
signal that stopped the run passed on to the caller."""

from __future__ import annotations

import copy
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rltrain import launch
from rltrain.algos.configs.base import AlgoConfig
from rltrain.checkpoint.run_dir import require_writable
from rltrain.config.compose import Composed, compose_job, composed_dict, normalize_overrides
from rltrain.config.overrides import explain, first_of_sweeps
from rltrain.config.schema import TrainConfig
from rltrain.config.validation import validate
from rltrain.errors import UserError
from rltrain.guest import guest
from rltrain.parallel.world import world_from_env
from rltrain.run_folder.argv import is_multirun
from rltrain.run_folder.find import resumed_config, with_saved_choices
from rltrain.run_folder.lock import remove_empty
from rltrain.runner.setup import default_run_dir

log = logging.getLogger("rltrain")
_BUSY = threading.RLock()
"""Held by the thread in `train` (another thread's call is refused: Hydra's state is global)."""


def train(overrides: list[str] | TrainConfig | None = None, run_dir: str | Path | None = None,
          algo: Any = None, callbacks: dict[str, list] | None = None) -> dict[str, Any]:
    """Train from Hydra-style overrides (`["algo=ppo", "env=CartPole-v1", "net.hidden=[32]"]`)
    or a `TrainConfig`, checked as the command line checks them (a `TrainConfig` is validated
    on a copy; yours is left as it is).

    Returns the final evaluation result (`mean_reward`, `std_reward`, ...); with
    `seeds_per_trial=K`, the trial's summary (`mean_reward` over the seeds). `algo=` trains an
    algorithm built in Python instead of the one the config would build. `resume=<run>`
    continues a run as `rltrain resume=` does (into `run_dir`, default the run's own folder).
    What only the command line does is refused in one line, not ignored: sweeps (`seed=0,1,2`),
    searches and `hydra.*` options (give `run_dir=`).
    It leaves the caller's process as it found it (`rltrain/guest.py`): random streams, torch's
    threads, default dtype and grad mode, logging, and a Hydra of the caller's own.
    """
    if isinstance(overrides, str):  # train("algo=ppo env=CartPole-v1")
        raise UserError(f"train() takes a list of overrides, not one string: "
                        f"train({overrides.split()!r})")
    world = world_from_env()
    if world is not None and world.size > 1:
        launch.ranks(world, None)  # refused: a torchrun job is the command line's
    # resume=<run>: its algo= option first, so its algo.* overrides are checked against that
    # algorithm's fields, as on the command line (they were "unknown" against PPO's)
    given = (None if isinstance(overrides, TrainConfig)
             else with_saved_choices([str(o) for o in overrides or []]))
    cfg, composed = _config(overrides if given is None else given)
    if not _BUSY.acquire(blocking=False):
        raise UserError("train() is already running in another thread of this process; rltrain "
                        "is not thread-safe (Hydra's global state, the process's random "
                        "streams): run parallel trainings as processes")
    try:
        with guest(console=True):
            try:
                result = _train(cfg, given, run_dir, algo, callbacks, composed)
            except SystemExit as exc:  # a trial's seed stopped by a signal (run_seeds exits
                signum = exc.code - 128 if isinstance(exc.code, int) else 0  # as the CLI)
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    raise
                result = {"stopped": signal.Signals(signum).name}
    finally:
        _BUSY.release()
    _pass_on_signal(result)
    return result


def _pass_on_signal(result: dict[str, Any]) -> None:
    """A run stopped by Ctrl-C or SIGTERM saved its checkpoint and gave the caller's signal
    handlers back: the signal now goes on to the caller, as if rltrain had not caught it (Ctrl-C
    raises KeyboardInterrupt; a SIGTERM ends the process unless the caller handles it), where
    `train()` used to return as if nothing had happened and an application's loop went on."""
    stopped = result.get("stopped")
    names = set(stopped.values()) if isinstance(stopped, dict) else {stopped}
    for name in ("SIGINT", "SIGTERM"):
        if name in names:
            signal.raise_signal(signal.Signals[name])


def _train(cfg: TrainConfig, given: list[str] | None, run_dir: str | Path | None, algo: Any,
           callbacks: dict[str, list] | None, composed: Composed | None) -> dict[str, Any]:
    """`train` of a validated config (`given`: its override list, None for a `TrainConfig`;
    `composed`: its composition, when `_config` composed it): the job's folder picked, then the
    job run by `launch.run` as the command line runs it."""
    if run_dir is not None:  # fixed now: a chdir of the caller's mid-run must not split the run
        run_dir = Path(run_dir).absolute()
    where = Path(run_dir) if run_dir is not None else None if cfg.resume else Path("outputs")
    if where is not None:  # a resume into its own folder: checked where the run is found
        require_writable(where, f"train writes the run into {where}")
    resumed = cfg.resume if cfg.resume != "auto" else None
    # a resume continues in the run's own folder, as `rltrain resume=` does; a new run gets a
    # new outputs/<date>/<time>, as on the command line
    folder = run_dir or (launch.resumed_folder(resumed) if resumed else default_run_dir())
    normalized = normalize_overrides(given or [])
    job = launch.Job(folder, lambda: cfg, given, lambda: composed_dict(normalized, composed),
                     hydra=False,
                     algo=algo, callbacks=callbacks)
    try:
        return launch.run(job, cfg.resume).result
    except BaseException:
        if run_dir is None and not resumed:  # the folder claimed for it, if left empty
            remove_empty([folder])
        raise


def _config(overrides: list[str] | TrainConfig | None) -> tuple[TrainConfig, Composed | None]:
    """The validated config of `train`'s argument, and its composition when composed here (an
    override list of a new run); `UserError` for what it cannot do."""
    composed = None
    if isinstance(overrides, TrainConfig):
        if not isinstance(overrides.algo, AlgoConfig):
            raise UserError("train(TrainConfig(...)) needs algo=<an algorithm config>, e.g. "
                            "TrainConfig(algo=PPOConfig(), env=EnvConfig(id='CartPole-v1'))")
        _check_types(overrides)
        cfg = validate(copy.deepcopy(overrides))
    else:
        given = list(overrides or [])
        flags = [o for o in given if o.startswith("-")
                 or o.lstrip("+~").startswith(("hydra.", "hydra/"))]
        if flags:
            raise UserError(f"train(): {flags[0]} is a command-line option; the Python API runs "
                            f"one job into run_dir= (default: a new outputs/<date>/<time>)")
        if is_multirun(given):  # +hpo=<algo>: a search, many jobs
            raise UserError("train() runs one job: a search (+hpo=...) is for the command line")
        if first_of_sweeps(given) != given:
            raise UserError("train() runs one job: sweeps (seed=0,1,2) are for `rltrain -m`; "
                            "in Python, call train() once per value (or num_seeds=N for seeds)")
        # resume=<run>: checked against the saved config, as `rltrain resume=` does (as a new
        # run's, the overrides were checked against the default env's preset)
        cfg = resumed_config(given)
        if cfg is None:
            composed = compose_job(given)
            cfg = copy.deepcopy(composed.train_cfg)
    if cfg.resume and isinstance(overrides, TrainConfig):
        raise UserError(f"train(TrainConfig(resume={cfg.resume!r})): a resume checks what its "
                        f"overrides change; give them as a list, [..., 'resume=<run>']")
    return cfg, composed


def _check_types(cfg: TrainConfig) -> None:
    """The types the command line's schema checks, for a `TrainConfig` built in Python
    (`PPOConfig(lr="abc")` met a TypeError deep in validation): one line naming the field."""
    try:
        OmegaConf.structured(cfg)
    except Exception as exc:  # noqa: BLE001  (OmegaConf's validation and type errors)
        raise UserError(f"train(TrainConfig(...)): {explain(exc)}") from exc
