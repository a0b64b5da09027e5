"""What a resume continues, found and checked from its override list before anything starts:
the folder `resume=<run, checkpoint or batch>` (or `resume=auto`) trains in, the options that
chose the resumed run's configuration, and the config the resume trains with, its overrides
checked against the saved one. The command line, `rltrain.train()` and torchrun's rank 0 all
check a resume here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rltrain.checkpoint.run_dir import HYDRA, RunDir
from rltrain.config.compose import composed_dict, normalize_overrides, register_options
from rltrain.config.overrides import first_of_sweeps
from rltrain.run_folder.argv import arg_value, hydra_quoted, is_override
from rltrain.run_folder.batch import batch_overrides, batch_seeds, resumable_seeds


def resume_run_dir(argv: list[str]) -> list[str]:
    """`resume=<run or ckpt>` continues in that run's folder: point Hydra's run dir there."""
    value = arg_value(argv, "resume")
    if value == "auto":
        return _resume_auto_batch(argv) or _resume_auto_run(argv)
    if not value or any(a.startswith("hydra.run.dir=") for a in argv):
        return []

    if batch_seeds(value):  # a num_seeds batch: every seed's checkpoint, the batch's folder
        _check_batch_resume(Path(value), argv)
        return [f"hydra.run.dir={hydra_quoted(str(Path(value)))}",
                f"hydra.output_subdir={HYDRA}/resume"]
    # start-up: torch (and the run-folder helpers) only when resuming
    from rltrain.run_folder.lock import check_not_live
    from rltrain.run_folder.resume_checkpoint import find_resume_checkpoint

    if Path(value).is_dir():  # a live run may have no checkpoint yet: say that it is live
        check_not_live(Path(value))
    ckpt = find_resume_checkpoint(value, Path("."))
    _check_resume(ckpt, argv)
    return [f"hydra.run.dir={hydra_quoted(str(RunDir.of_checkpoint(ckpt).root))}",
            f"hydra.output_subdir={HYDRA}/resume"]


def _check_batch_resume(folder: Path, argv: list[str]) -> None:
    """Refuse a resume of the batch in `folder` that would change its experiment (`num_seeds=`
    and `seed=` restating the batch's own values are accepted)."""
    argv = batch_overrides(folder, argv)
    for ckpt in resumable_seeds(folder).values():
        _check_resume(ckpt, argv)


def _resume_auto_batch(argv: list[str]) -> list[str]:
    """`resume=auto hydra.run.dir=<a batch of seeds with checkpoints>` resumes that batch: its
    overrides checked as `resume=<batch>`'s, and Hydra's record of this command kept beside
    the batch's (`.hydra/resume/`), which tells that it is a batch."""
    target = arg_value(argv, "hydra.run.dir")

    if not target or not batch_seeds(target) or not RunDir(Path(target)).can_resume():
        return []
    _check_batch_resume(Path(target), argv)
    return [f"hydra.output_subdir={HYDRA}/resume"]


def _resume_auto_run(argv: list[str]) -> list[str]:
    """`resume=auto hydra.run.dir=<a run with a checkpoint to continue>` resumes that run as
    `resume=<run>` does: its overrides checked now, and Hydra's record of this command kept
    beside the run's own (`.hydra/resume/`), which it would otherwise replace."""
    target = arg_value(argv, "hydra.run.dir")
    paths = RunDir(Path(target)) if target and "${" not in target else None
    if paths is None or not paths.latest.is_file() or paths.final.exists():
        return []  # (as `resume_checkpoint.find_resume_checkpoint("auto", ...)` finds nothing)
    _check_resume(paths.latest, argv)
    return [f"hydra.output_subdir={HYDRA}/resume"]


def with_saved_choices(argv: list[str]) -> list[str]:
    """`argv` with the options that chose the resumed run's configuration first (`algo=`,
    `env=`, `env.id=`, `tuned=`, `~tuned`, from its record `.hydra/overrides.yaml`), each one
    `argv` does not set itself, when it resumes a run (`resume=<run>`, or `resume=auto` with
    `hydra.run.dir=<run>`). A run without that record (a folder copied without `.hydra/`) gives
    its checkpoint's algorithm. Choices that name code (`env.id=mymod:make`) are never carried:
    code runs only when the command names it (`envs/trust.py`).

    A resume's overrides are composed and checked before the saved config replaces the
    composition: without the run's choices they were checked against the default algorithm's
    fields (`algo.learning_starts` of a DQN run was "unknown") and the default env's preset
    (`env.num_envs=4` on a PPO Breakout run was refused for the Pendulum preset's batch size,
    not for changing the experiment). The record gives the options as typed (`algo=ppo_lstm`,
    which a checkpoint's `name: ppo` would not give back), so the resume's record repeats them
    and `rltrain report` groups the run as before. A run started without them used the
    defaults, which compose again by themselves."""
    value = arg_value(argv, "resume")
    if value == "auto":
        value = arg_value(argv, "hydra.run.dir")
    if not value:
        return argv
    target = Path(value)
    folder = target if target.is_dir() else RunDir.of_checkpoint(target).root
    try:
        recorded = yaml.safe_load(RunDir(folder).hydra_overrides.read_text()) or []
    except (OSError, yaml.YAMLError):
        recorded = _checkpoint_algo(target)
    if not isinstance(recorded, list):
        return argv
    given = {_choice_key(a) for a in argv}
    choices = [str(o) for o in recorded if isinstance(o, str) and _choice_key(o) in _CHOICES]
    if any(":" in o for o in choices):  # code (`env.id=mymod:make`) runs only when named
        # again; `env=` alone would then read as a change of env (the id overrode it)
        choices = [o for o in choices if ":" not in o and _choice_key(o) != "env"]
    carried = [o for o in choices if _choice_key(o) not in given]
    first = next((i for i, a in enumerate(argv) if is_override(a)), len(argv))
    return [*argv[:first], *carried, *argv[first:]]


def _checkpoint_algo(target: Path) -> list[str]:
    """[`algo=<name>`] of the checkpoint `target` names (a run folder's latest), [] when there
    is none to read: a resume without its run's record still checks `algo.*` against its own
    algorithm (`ppo_lstm` for PPO with an LSTM core, the option that sets it)."""
    try:
        # start-up: torch only when resuming (a new run's command line imports none)
        from rltrain.checkpoint import format as checkpoint
        from rltrain.checkpoint.payload import RESUME
        from rltrain.run_folder.resume_checkpoint import find_resume_checkpoint

        ckpt = find_resume_checkpoint(str(target), Path("."))
        algo = checkpoint.load(ckpt, require=RESUME)["config"]["algo"]
    except Exception:  # noqa: BLE001 - no readable checkpoint: the resume itself says why
        return []
    name, core = str(algo.get("name", "")), algo.get("recurrent", "none")
    return [f"algo={name}_lstm" if core == "lstm" else f"algo={name}"] if name else []


_CHOICES = ("algo", "env", "env.id", "tuned")
"""The options that choose a run's composed configuration (groups, the env id, the preset)."""


def _choice_key(arg: str) -> str:
    """`tuned` for `tuned=x` and `~tuned`; `env.id` for `env.id=x`; else the override's key."""
    return arg.lstrip("+~").partition("=")[0]


def resumed_config(argv: list[str]) -> Any:
    """The `TrainConfig` a resume of one run (`resume=<run or checkpoint>`, not `auto`, not a
    seed batch) trains with, its overrides checked against the saved config; None for any other
    command line. What `train()` and torchrun check a resume with, as the command line does."""
    value = arg_value(argv, "resume")
    if not value or value == "auto":
        return None
    # start-up: torch only when resuming (a new run's command line imports none)
    from rltrain.run_folder.resume_checkpoint import find_resume_checkpoint

    if batch_seeds(value):
        return None

    argv = normalize_overrides(argv)
    register_options(argv)  # the env options it names, and the schemas
    return _check_resume(find_resume_checkpoint(value, Path(".")), argv)


def _check_resume(ckpt: Path, argv: list[str]) -> Any:
    """Refuse experiment-changing overrides now, before Hydra records anything in the run;
    returns the config the resume trains with."""
    # start-up: torch only when resuming (a new run's command line imports none)
    from rltrain.checkpoint import format as checkpoint
    from rltrain.checkpoint.payload import RESUME
    from rltrain.run_folder.resume_rules import resume_config

    saved = checkpoint.load(ckpt, require=RESUME)["config"]  # a damaged file fails first, fast
    overrides = first_of_sweeps([a for a in argv if is_override(a)])  # not `--cfg job`'s `job`
    return resume_config(saved, composed_dict(overrides), overrides, str(ckpt))
