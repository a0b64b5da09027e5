"""Hydra's run of one job, without composing the configuration a second time to learn the mode.

For any command line, `hydra.main` first composes the whole configuration only to read
`hydra.mode` from it, then composes it again to run the job. Each composition costs ~0.1-0.2 s of
CPU (the defaults tree, ~11 YAML files, the structured schemas). When the command line holds
only overrides and none of them makes a multirun, the mode is known before anything is
composed: this module runs the job through Hydra's public pieces (the compose API, `run_job`,
the configured callbacks) as `hydra.main` runs it, minus the probe. A command with a flag
(`-m`, `--cfg`, `--config-dir`, ...) goes through `hydra.main` as before (`cli/train.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from rltrain.config.overrides import explain
from rltrain.errors import UserError
from rltrain.run_folder.argv import is_multirun, is_override

CONFIG_MODULE = "rltrain.conf"
CONFIG_PATH = f"pkg://{CONFIG_MODULE}"
CONFIG_NAME = "config"
VERSION_BASE = "1.3"
TASK_NAME = "train"
"""What `hydra.main` names the task from `cli/train.py` (the config sets `hydra.job.name` too)."""


def is_single_run(argv: list[str]) -> bool:
    """Whether `argv` is a plain single run: overrides only (no flag), none making a multirun."""
    return all(is_override(arg) for arg in argv) and not is_multirun(argv)


def run_overrides(argv: list[str]) -> list[str]:
    """`argv` as Hydra's run takes it: with `hydra.mode=RUN` added, as `hydra.main` adds it
    when the composed configuration sets no mode, unless the command line sets one itself."""
    sets_mode = any(arg.split("=")[0].lstrip("+~") == "hydra.mode" for arg in argv)
    return list(argv) if sets_mode else [*argv, "hydra.mode=RUN"]


def run_single(argv: list[str], job: Callable[[Any], Any]) -> None:
    """Run `job` once on the configuration `argv` composes, as `hydra.main` runs it: composed
    with the `hydra` node, the run folder, `.hydra/` and job logging made by Hydra's `run_job`,
    the configured `hydra.callbacks` told of the run and the job. A `hydra.*` override Hydra
    refuses is a one-line `UserError`; an error the job raises is raised here (a job's expected
    failures already exit with their one line, `cli/train.py`)."""
    # start-up: Hydra only once a command line is checked
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    assert is_single_run(argv), f"not a single run: {argv}"
    with initialize_config_module(version_base=VERSION_BASE, config_module=CONFIG_MODULE,
                                  job_name=TASK_NAME):
        try:  # what rltrain's own check leaves to Hydra: its `hydra.*` overrides
            cfg = compose(CONFIG_NAME, overrides=run_overrides(argv), return_hydra_config=True)
        except Exception as exc:
            raise UserError(explain(exc)) from exc
        callbacks = Callbacks(cfg)
        callbacks.notify("on_run_start", config=cfg, config_name=CONFIG_NAME)
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(),
                               callbacks=callbacks)  # type: ignore[arg-type]
        done = run_job(task_function=job, config=cfg, job_dir_key="hydra.run.dir",
                       job_subdir_key=None, hydra_context=context)
        callbacks.notify("on_run_end", config=cfg, config_name=CONFIG_NAME, job_return=done)
        done.return_value  # noqa: B018 (raises the job's error, as Hydra's run does)


class Callbacks:
    """The `hydra.callbacks` of a configuration, instantiated, told of a run's and a job's
    start and end as Hydra tells them (end hooks in reverse order; a hook's error is a warning,
    not the run's failure)."""

    def __init__(self, cfg: Any) -> None:
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        entries = OmegaConf.select(cfg, "hydra.callbacks") or {}
        self.callbacks = [instantiate(params) for params in entries.values()]

    def notify(self, hook: str, **kwargs: Any) -> None:
        ordered = reversed(self.callbacks) if hook.endswith("_end") else self.callbacks
        for callback in ordered:
            method = getattr(callback, hook, None)
            if method is None:
                continue
            try:
                method(**kwargs)
            except Exception as exc:  # as Hydra: a callback cannot fail the run
                warnings.warn(f"Callback {type(callback).__name__}.{hook} raised "
                              f"{type(exc).__name__}: {exc}", stacklevel=2)

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        self.notify("on_job_start", config=config, **kwargs)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        self.notify("on_job_end", config=config, job_return=job_return, **kwargs)
