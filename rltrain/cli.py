"""Command line: `rltrain [overrides]` trains, `rltrain eval ckpt=...` evaluates a checkpoint,
`rltrain export ckpt=... format=onnx|torchscript` writes the policy for deployment.

Bad input becomes one line on stderr and exit code 2; set RLTRAIN_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rltrain.envs.trust import NamedCode, named_code
from rltrain.errors import TrainingError, UserError

log = logging.getLogger("rltrain")
EXIT_USAGE = 2
EXIT_TRAINING = 1
_HYDRA_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
                "--shell-completion", "-sc", "--version")


def _debug() -> bool:
    return os.environ.get("RLTRAIN_DEBUG", "") not in ("", "0", "false")


def fail(message: str, code: int = 2) -> None:
    """Print one error line and exit with `code` (2: bad input, 1: training failed)."""
    print(f"rltrain: error: {message}", file=sys.stderr)
    sys.exit(code)


def main() -> None:
    """Entry point of the `rltrain` command."""
    argv = sys.argv[1:]
    # a log file that cannot be written (a full disk) must not print logging's own tracebacks:
    # the run reports the failure itself, in one line
    logging.raiseExceptions = False
    try:
        if argv[:1] == ["eval"]:
            eval_command(argv[1:])
            return
        if argv[:1] == ["report"]:
            report_command(argv[1:])
            return
        if argv[:1] == ["export"]:
            export_command(argv[1:])
            return
        train_command(argv)
    except UserError as exc:
        if _debug():
            raise
        fail(str(exc))
    except TrainingError as exc:  # eval/export of a checkpoint whose env fails
        if _debug():
            raise
        fail(str(exc), EXIT_TRAINING)
    except KeyboardInterrupt:  # a second Ctrl-C: quit now, without a traceback
        if _debug():
            raise
        print("rltrain: interrupted", file=sys.stderr)
        sys.exit(130)


def train_command(argv: list[str]) -> None:
    """Validate the overrides, then hand over to Hydra (which also serves --help, --cfg, -m)."""
    from rltrain.config import register_configs
    from rltrain.overrides import (
        check_overrides,
        env_choices,
        env_import_overrides,
        net_overrides,
        preset_overrides,
    )
    from rltrain.sweep import check_plugins

    # `env.import=m` -> `env.imports=[m]`; `net.hidden=...` -> `algo.net.hidden=...`; `~tuned`
    # when `env.id=` names the env (no preset of another env's values)
    argv = preset_overrides(net_overrides(env_import_overrides(argv)))
    check_plugins(argv)  # a missing sweeper/launcher plugin: one line naming the extra
    register_configs(env_choices(argv))  # imports env.imports first: their ids become options
    if not any(a.split("=")[0] in _HYDRA_FLAGS for a in argv):
        check_overrides([a for a in argv if not a.startswith("-")])
    extra = _resume_run_dir(argv)
    _check_writable([*argv, *extra])
    target = _single_run_dir([*argv, *extra])
    if target is None:  # a multirun, --help, --cfg ...: each job's Runner guards its own folder
        sys.argv = [sys.argv[0], *argv, *extra]
        _train_task()
        return
    from rltrain.runner.ownership import check_target, run_lock

    with run_lock(target):  # before Hydra writes .hydra/ into the folder
        check_target(target, _arg_value(argv, "resume"), _budget(argv))
        given = _arg_value([*argv, *extra], "hydra.run.dir") is not None
        sys.argv = [sys.argv[0], *argv, *extra, *([] if given else [f"hydra.run.dir={target}"])]
        _train_task()


@hydra.main(version_base="1.3", config_path="pkg://rltrain.conf", config_name="config")
def _train_task(cfg: DictConfig) -> float:
    """One training job (a multirun calls it once per job); returns the final eval mean."""
    try:
        return _run_job(cfg)
    except (UserError, TrainingError) as exc:
        if _debug():
            raise
        fail(str(exc), EXIT_USAGE if isinstance(exc, UserError) else EXIT_TRAINING)
        raise  # unreachable: fail() exits


def _run_job(cfg: DictConfig) -> float:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from rltrain import checkpoint
    from rltrain.config import to_train_config
    from rltrain.runner.resume import find_resume_checkpoint, resume_config
    from rltrain.runner.runner import Runner
    from rltrain.sweep import fit_threads, run_seeds

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    payload = None
    ckpt = find_resume_checkpoint(str(cfg.resume), run_dir) if cfg.get("resume") else None
    if ckpt is not None:
        payload = checkpoint.load(ckpt)
        composed = OmegaConf.to_container(cfg, resolve=True)
        train_cfg = resume_config(payload["config"], composed, list(HydraConfig.get().overrides.task),
                                  str(ckpt))
        log.info("resuming %s from %s", run_dir, ckpt)
    else:
        train_cfg = to_train_config(cfg)
    train_cfg = fit_threads(train_cfg)
    if train_cfg.preset and payload is None:
        log.info("applied tuned preset conf/tuned/%s.yaml (your overrides win)", train_cfg.preset)
    if train_cfg.seeds_per_trial > 1 and payload is None:
        return run_seeds(train_cfg, run_dir)
    runner = Runner(train_cfg, run_dir, resume_from=payload)
    result = runner.run()
    if "stopped" in result and runner.stopper.signum is not None:  # preempted: tell schedulers
        sys.exit(128 + runner.stopper.signum)
    return float(result["mean_reward"])


def _arg_value(argv: list[str], key: str) -> str | None:
    """The value of the last `key=value` in `argv` (None when absent)."""
    values = [a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith(f"{key}=")]
    return values[-1] if values else None


def _budget(argv: list[str]) -> float | None:
    """`total_timesteps=` of the command line, if it gives a number."""
    value = _arg_value(argv, "total_timesteps")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def _single_run_dir(argv: list[str]) -> Path | None:
    """The folder a single (not multirun) training run writes to; None for multirun or flags.

    Without `hydra.run.dir=`, Hydra's `outputs/<date>/<time>` is taken, with a `-<k>` suffix
    when a run started in the same second already has it (parallel runs must not share one).
    """
    if any(a in ("-m", "--multirun") or a.split("=")[0] in _HYDRA_FLAGS for a in argv):
        return None
    given = _arg_value(argv, "hydra.run.dir")
    _check_free_space(Path(given if given is not None and "${" not in given else "outputs"))
    if given is not None:
        return None if "${" in given else Path(given)
    from datetime import datetime

    now = datetime.now()
    base = Path("outputs") / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S")
    for k in range(1000):  # mkdir claims a name atomically against runs started in parallel
        candidate = base.with_name(f"{base.name}-{k}") if k else base
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
    raise UserError(f"{base}: 1000 runs started in this second; give hydra.run.dir=<folder>")


MIN_FREE_BYTES = 1 << 20
"""A run starts only with this much free space: Hydra's own first writes (.hydra/) would
otherwise fail with its traceback. Later shortages are caught by the Runner (one line)."""


def _check_free_space(target: Path) -> None:
    """Refuse to start a run on a (nearly) full disk, before anything is written."""
    import shutil

    existing = target.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise TrainingError(f"disk full: {free // 1024} KiB free where {target} lives; free "
                            f"space (a run needs at least {MIN_FREE_BYTES >> 20} MiB to start)")


def _check_writable(argv: list[str]) -> None:
    """Refuse an output folder we cannot create or write, before Hydra tries to."""
    keys = ("hydra.run.dir=", "hydra.sweep.dir=")
    target = next((a.split("=", 1)[1] for a in reversed(argv) if a.startswith(keys)), "outputs")
    path = Path(target).absolute()
    # 255 bytes: NAME_MAX of ext4, xfs, btrfs, APFS and NTFS; the OS refuses longer names
    long = next((part for part in path.parts if len(os.fsencode(part)) > 255), None)
    if long is not None:
        raise UserError(f"output folder name too long: {long[:16]}... is {len(os.fsencode(long))} "
                        f"bytes, the file system's limit is 255; choose a shorter "
                        f"hydra.run.dir=<folder>")
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        raise UserError(f"output folder {target} cannot be created: {path} is a file; "
                        f"choose another with hydra.run.dir=<folder>")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"output folder {target} is not writable ({path} is read-only); "
                        f"choose another with hydra.run.dir=<folder>")


def _resume_run_dir(argv: list[str]) -> list[str]:
    """`resume=<run or ckpt>` continues in that run's folder: point Hydra's run dir there."""
    from rltrain.runner.resume import find_resume_checkpoint, run_dir_of

    value = next((a.split("=", 1)[1] for a in argv if a.startswith("resume=")), None)
    if not value or value == "auto" or any(a.startswith("hydra.run.dir=") for a in argv):
        return []
    ckpt = find_resume_checkpoint(value, Path("."))
    _check_resume(ckpt, argv)
    return [f"hydra.run.dir={run_dir_of(ckpt)}", "hydra.output_subdir=.hydra/resume"]


def _check_resume(ckpt: Path, argv: list[str]) -> None:
    """Refuse experiment-changing overrides now, before Hydra records anything in the run."""
    from omegaconf import OmegaConf

    from rltrain import checkpoint
    from rltrain.overrides import compose_checked, first_of_sweeps
    from rltrain.payload import RESUME
    from rltrain.runner.resume import resume_config

    saved = checkpoint.load(ckpt, require=RESUME)["config"]  # a damaged file fails first, fast
    overrides = first_of_sweeps([a for a in argv if not a.startswith("-")])
    composed = OmegaConf.to_container(compose_checked("config", overrides), resolve=True)
    resume_config(saved, composed, overrides, str(ckpt))


def eval_command(argv: list[str]) -> dict:
    """`rltrain eval ckpt=... [episodes=N deterministic=false seed=S device=... video=true]`."""
    from rltrain.config import register_configs, to_command_config
    from rltrain.evaluate import evaluate
    from rltrain.overrides import compose_checked

    register_configs(env_ids=[])
    argv, named = _split_named_code(argv)
    cfg = to_command_config(compose_checked("eval", argv))
    result = evaluate(cfg.ckpt, episodes=cfg.episodes, deterministic=cfg.deterministic,
                      seed=cfg.seed, device=cfg.device, num_envs=cfg.num_envs, video=cfg.video,
                      video_episodes=cfg.video_episodes, named=named)
    _print_eval_table(result)
    return result


def export_command(argv: list[str]) -> dict:
    """`rltrain export ckpt=... [format=onnx|torchscript out=FILE check_samples=N seed=S]`."""
    from rltrain.config import register_configs, to_command_config
    from rltrain.export.command import agreement_line, export_policy
    from rltrain.overrides import compose_checked

    register_configs(env_ids=[])
    argv, named = _split_named_code(argv)
    cfg = to_command_config(compose_checked("export", argv))
    result = export_policy(cfg.ckpt, cfg.format, cfg.out, cfg.check_samples, cfg.seed, named)
    dtype = "int64" if result["action_kind"] == "discrete" else "float32"
    folded = ", normalization folded in" if result["normalized_obs"] else ""
    print(f"export: wrote {result['path']} ({result['format']}): float32 obs "
          f"{_batch_shape(result['obs_shape'])} -> {dtype} env action "
          f"{_batch_shape(result['action_shape'])}{folded}")
    if not result["ok"]:
        fail(f"export: {agreement_line(result)}", EXIT_TRAINING)
    print(f"export: {agreement_line(result)}")
    return result


def _split_named_code(argv: list[str]) -> tuple[list[str], NamedCode]:
    """(the command's own arguments, the user code named by `env.import=` / `env.id=`)."""
    env_args = [a for a in argv if a.lstrip("+~").startswith("env.")]
    for arg in env_args:
        if arg.lstrip("+~").partition("=")[0] not in ("env.import", "env.imports", "env.id"):
            raise UserError(f"{arg}: this command takes only env.import=, env.imports= and "
                            f"env.id= (to name code the checkpoint's env needs)")
    return [a for a in argv if a not in env_args], named_code(env_args)


def _batch_shape(shape: list[int]) -> str:
    return "[" + ", ".join(["batch", *map(str, shape)]) + "]"


def report_command(argv: list[str]) -> None:
    """`rltrain report [folder]`: every run below a folder, grouped, as a table, CSV and plot."""
    from rltrain.report.cli import report_main

    report_main(argv)


def _print_eval_table(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result['algo']} on {result['env']} — {result['episodes']} episodes "
                        f"({'deterministic' if result['deterministic'] else 'stochastic'})")
    for col in ("mean return", "std", "min", "max", "mean length"):
        table.add_column(col, justify="right")
    table.add_row(*(f"{result[k]:.2f}" for k in ("mean_reward", "std_reward", "min_reward",
                                                   "max_reward", "mean_length")))
    console = Console()
    console.print(table)
    console.print(f"checkpoint: {result['checkpoint']} (step {result['global_step']:,})")
    console.print(f"results:    {result['results_path']}")
    if "videos" in result:
        folder = Path(result["results_path"]).parent / "videos"
        n = len(result["videos"])
        console.print(f"videos:     {folder}/ ({n} episode{'' if n == 1 else 's'})")
        for video in result["videos"]:
            console.print(f"            {Path(video).name}")


if __name__ == "__main__":
    main()
