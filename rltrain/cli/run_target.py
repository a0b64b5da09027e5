"""Where a training run writes: the run folder of a command line, checked before Hydra starts.

A single run gets `hydra.run.dir=` or a fresh `outputs/<date>/<time>[-k]` claimed atomically; a
resumed run continues in its checkpoint's folder. Folders that cannot be written and full disks
are refused here, in one line, before Hydra's own first writes.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Quote, QuotedString

from rltrain.checkpoint.run_dir import HYDRA, RunDir, claim_default_run_dir, day_folder
from rltrain.config.compose import composed_dict, normalize_overrides, register_options
from rltrain.config.overrides import first_of_sweeps
from rltrain.errors import TrainingError, UserError
from rltrain.seeds.folder import batch_overrides, batch_seeds, resumable_seeds

HYDRA_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
               "--shell-completion", "-sc", "--version")
"""Hydra's flags that print something instead of running a job."""


def is_override(arg: str) -> bool:
    """Whether a command-line argument is a Hydra override (`key=value`, `+key=`, `~key`), not a
    flag (`-m`, `--cfg`) or a flag's value (`job`)."""
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def with_overrides(argv: list[str], items: list[str]) -> list[str]:
    """`argv` with `items` placed after its last override: Hydra reads the overrides as one
    run of arguments, so items after a trailing flag (`... -m`) were "unrecognized"."""
    last = max((i for i, a in enumerate(argv) if is_override(a)), default=len(argv) - 1)
    return [*argv[:last + 1], *items, *argv[last + 1:]]


def arg_value(argv: list[str], key: str) -> str | None:
    """The value of the last `key=value` in `argv` (None when absent), without the quotes
    Hydra's grammar takes off a quoted value (`resume='/runs/my run'`, see `unquote`)."""
    values = [a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith(f"{key}=")]
    return unquote(values[-1]) if values else None


def unquote(value: str) -> str:
    """`value` as Hydra's override grammar reads it when it is one quoted string (`'a b'` or
    `"a b"`, escapes such as `\\'` resolved): what the job's config will hold. Anything else
    is returned as typed. A path with spaces or non-ASCII letters must be quoted on a Hydra
    command line, so every raw `key=value` read here (a run folder, `resume=`) goes through
    this: the quotes kept, `resume='/runs/été'` looked for a folder named `'/runs/été'`."""
    if len(value) < 2 or value[0] not in "'\"" or value[-1] != value[0]:
        return value

    try:
        parsed = OverridesParser.create().parse_override(f"key={value}").value()
    except Exception:  # noqa: BLE001 - not one quoted string (`'a' 'b'`): Hydra reports it
        return value
    return parsed if isinstance(parsed, str) else value


def hydra_quoted(value: str) -> str:
    """`value` written so that Hydra's override grammar reads it back unchanged: as typed
    when it can (`outputs/2024-01-01/10-00-00`), else quoted (`'/runs/my runs/été'`: Hydra
    refuses non-ASCII letters unquoted)."""
    try:
        if OverridesParser.create().parse_override(f"key={value}").value() == value:
            return value
    except Exception:  # noqa: BLE001 - not readable unquoted
        pass
    return QuotedString(text=value, quote=Quote.single).with_quotes()


def budget(argv: list[str]) -> float | None:
    """`total_timesteps=` of the command line, if it gives a number."""
    value = arg_value(argv, "total_timesteps")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def is_multirun(argv: list[str]) -> bool:
    """`-m`, or what implies it: a search (`+hpo=<algo>`: conf/hpo sets `hydra.mode: MULTIRUN`)
    or `hydra.mode=MULTIRUN` itself."""
    for arg in argv:
        key, _, value = arg.partition("=")
        if arg in ("-m", "--multirun") or (key.lstrip("+") == "hpo" and not key.startswith("~")) \
                or (key.lstrip("+") == "hydra.mode" and value == "MULTIRUN"):
            return True
    return False


def single_run_dir(argv: list[str]) -> Path | None:
    """The folder a single (not multirun) training run writes to; None for multirun or flags.

    Without `hydra.run.dir=`, Hydra's `outputs/<date>/<time>` is taken, with a `-<k>` suffix
    when a run started in the same second already has it (parallel runs must not share one).
    """
    if is_multirun(argv) or any(a.split("=")[0] in HYDRA_FLAGS for a in argv):
        return None
    given = arg_value(argv, "hydra.run.dir")
    check_free_space(Path(given if given is not None and "${" not in given else "outputs"))
    if given is not None:
        return None if "${" in given else Path(given)
    return claim_default_run_dir()


def claim_run_dir(argv: list[str]) -> tuple[Path | None, list[Path]]:
    """(`single_run_dir(argv)`, the folders claiming it created: the run folder and those of its
    parents that did not exist, innermost first), so that a run failing before its first step
    can leave none of them (`runner.ownership.clear_failed_start`). ([]: nothing to remove.)"""
    # start-up: only once a run folder is claimed (--help and refused command lines claim none)
    from rltrain.runner.ownership import new_folders

    given = arg_value(argv, "hydra.run.dir")
    # Hydra's default outputs/<date>/<time> is created by single_run_dir, with its parents
    parents = [] if given is not None else new_folders(Path("outputs") / day_folder())
    target = single_run_dir(argv)
    if target is None:
        return None, []
    return target, (new_folders(target) if given is not None else [target, *parents])


def with_run_dir(argv: list[str], target: Path | str) -> list[str]:
    """`argv` with `hydra.run.dir=<target>` (the folder claimed for it) unless it names one."""
    return argv if arg_value(argv, "hydra.run.dir") is not None else with_overrides(
        argv, [f"hydra.run.dir={hydra_quoted(str(target))}"])


MIN_FREE_BYTES = 1 << 20
"""A run starts only with this much free space: Hydra's own first writes (.hydra/) would
otherwise fail with its traceback. Later shortages are caught by the Runner (one line)."""


def check_free_space(target: Path) -> None:
    """Refuse to start a run on a (nearly) full disk, before anything is written."""

    existing = target.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise TrainingError(f"disk full: {free // 1024} KiB free where {target} lives; free "
                            f"space (a run needs at least {MIN_FREE_BYTES >> 20} MiB to start)")


def check_writable(argv: list[str]) -> None:
    """Refuse an output folder we cannot create or write, before Hydra tries to."""
    keys = ("hydra.run.dir=", "hydra.sweep.dir=")
    target = unquote(next((a.split("=", 1)[1] for a in reversed(argv) if a.startswith(keys)),
                          "outputs"))
    path = Path(target).absolute()
    # 255 bytes: NAME_MAX of ext4, xfs, btrfs, APFS and NTFS; the OS refuses longer names
    long = next((part for part in path.parts if len(os.fsencode(part)) > 255), None)
    if long is not None:
        raise UserError(f"output folder name too long: {long[:16]}... is {len(os.fsencode(long))} "
                        f"bytes, the file system's limit is 255; choose a shorter "
                        f"hydra.run.dir=<folder>")
    while not path.exists() and path != path.parent:
        _check_link(target, path)
        path = path.parent
    if not path.is_dir():
        raise UserError(f"output folder {target} cannot be created: {path} is a file; "
                        f"choose another with hydra.run.dir=<folder>")
    if shutil.disk_usage(path).total == 0:  # /proc, /sys: nothing can be stored there
        raise UserError(f"output folder {target} cannot be created: {path} is a virtual "
                        f"file system; choose another with hydra.run.dir=<folder>")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"output folder {target} is not writable ({path} is read-only); "
                        f"choose another with hydra.run.dir=<folder>")


def _check_link(target: str, path: Path) -> None:
    """Refuse a `path` (on the way to the output folder `target`) that does not exist but is
    there: a symbolic link to nothing, or a loop of links. `mkdir` would fail on it with
    FileExistsError after Hydra started, and a folder made where the link points would be
    somewhere the user did not name."""
    if not os.path.lexists(path):
        return
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            why = "a symbolic link that loops (it points, through links, back to itself)"
        else:
            why = f"a symbolic link to {os.readlink(path)}, which does not exist"
        raise UserError(f"output folder {target} cannot be created: {path} is {why}; fix or "
                        f"remove the link, or choose another hydra.run.dir=<folder>") from exc


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
    from rltrain.runner.ownership import check_not_live
    from rltrain.runner.resume import find_resume_checkpoint

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
        return []  # (as `runner.resume.find_resume_checkpoint("auto", ...)` finds nothing)
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
        from rltrain.runner.resume import find_resume_checkpoint

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
    from rltrain.runner.resume import find_resume_checkpoint

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
    from rltrain.runner.resume import resume_config

    saved = checkpoint.load(ckpt, require=RESUME)["config"]  # a damaged file fails first, fast
    overrides = first_of_sweeps([a for a in argv if is_override(a)])  # not `--cfg job`'s `job`
    return resume_config(saved, composed_dict(overrides), overrides, str(ckpt))
