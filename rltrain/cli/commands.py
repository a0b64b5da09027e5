"""Command line: `rltrain [overrides]` trains (`cli/train.py`), `rltrain eval ckpt=...` evaluates
a checkpoint, `rltrain export ckpt=... format=onnx|torchscript` writes the policy for deployment,
`rltrain report <folder>` summarizes runs, `rltrain list` shows what is on offer.

Bad input becomes one line on stderr and exit code 2; set RLTRAIN_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from rltrain.checkpoint.run_dir import RunDir
from rltrain.cli.exit import EXIT_TRAINING, debug, fail
from rltrain.cli.train import train_command
from rltrain.envs.trust import NamedCode, named_code
from rltrain.errors import TrainingError, UserError
from rltrain.loggers.run_log import root_handlers_kept


def main() -> None:
    """Entry point of the `rltrain` command."""
    argv = sys.argv[1:]
    # a log file that cannot be written (a full disk) must not print logging's own tracebacks:
    # the run reports the failure itself, in one line
    logging.raiseExceptions = False
    with root_handlers_kept():
        _dispatch(argv)


def _dispatch(argv: list[str]) -> None:
    """The command `argv` names, its errors as one line and an exit code."""
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
        if argv[:1] in (["list"], ["--list"]):
            # start-up: rich's table for `rltrain list` only (every command imports this module)
            from rltrain.cli.listing import print_listing

            print_listing()
            return
        train_command(argv)
    except UserError as exc:
        if debug():
            raise
        fail(str(exc))
    except TrainingError as exc:  # eval/export of a checkpoint whose env fails
        if debug():
            raise
        fail(str(exc), EXIT_TRAINING)
    except KeyboardInterrupt:  # a second Ctrl-C: quit now, without a traceback
        if debug():
            raise
        print("rltrain: interrupted", file=sys.stderr)
        sys.exit(130)


def eval_command(argv: list[str]) -> dict:
    """`rltrain eval ckpt=... [episodes=N deterministic=false seed=S device=... video=true]`."""
    # start-up: Hydra and torch only when this command runs (not for `rltrain list`)
    from rltrain.config.compose import compose_naming_choices
    from rltrain.config.schema import to_command_config
    from rltrain.config.store import register_configs
    from rltrain.evaluation.command import evaluate

    register_configs(env_ids=[])
    argv, named = _split_named_code(argv)
    # `device=null`: refused naming the choices, as a training option is
    cfg = to_command_config(compose_naming_choices("eval", argv, to_command_config))
    result = evaluate(cfg.ckpt, episodes=cfg.episodes, deterministic=cfg.deterministic,
                      seed=cfg.seed, device=cfg.device, num_envs=cfg.num_envs, video=cfg.video,
                      video_episodes=cfg.video_episodes, named=named)
    _print_eval_table(result)
    return result


def export_command(argv: list[str]) -> dict:
    """`rltrain export ckpt=... [format=onnx|torchscript out=FILE check_samples=N seed=S]`."""
    # start-up: Hydra and torch only when this command runs (not for `rltrain list`)
    from rltrain.config.compose import compose_naming_choices
    from rltrain.config.schema import to_command_config
    from rltrain.config.store import register_configs
    from rltrain.export.command import agreement_line, export_policy

    register_configs(env_ids=[])
    argv, named = _split_named_code(argv)
    # `format=null`: refused naming the choices, as a training option is
    cfg = to_command_config(compose_naming_choices("export", argv, to_command_config))
    result = export_policy(cfg.ckpt, cfg.format, cfg.out, cfg.check_samples, cfg.seed, named)
    dtype = "float32" if result["action_kind"] == "box" else "int64"
    folded = ", normalization folded in" if result["normalized_obs"] else ""
    recurrent = result["metadata"].get("recurrent")
    state = (" + float32 state [{}] (zeros at an episode's start)".format(
        ", ".join(str(d) for d in recurrent["state_shape"])) if recurrent else "")
    if "action_mask" in result["metadata"].get("inputs", []):
        state += " + bool action_mask [batch, n] (True = valid)"
    shapes, dtypes = result["obs_shape"], result.get("obs_dtype", "float32")
    obs = (", ".join(f"{dtypes[k]} obs.{k} {_batch_shape(v)}" for k, v in shapes.items())
           if isinstance(shapes, dict) else f"{dtypes} obs {_batch_shape(shapes)}")
    print(f"export: wrote {result['path']} ({result['format']}): {obs}{state} -> {dtype} env action "
          f"{_batch_shape(result['action_shape'])}{' + next state' if recurrent else ''}{folded}")
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
    # start-up: Hydra, numpy and the report only when this command runs
    from rltrain.report.cli import report_main

    report_main(argv)


def _print_eval_table(result: dict) -> None:
    # start-up: rich only for the eval table (`--help` and refusals never print one)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result['algo']} on {result['env']} — {result['episodes']} episodes "
                        f"({'deterministic' if result['deterministic'] else 'stochastic'})")
    columns = {"mean return": "mean_reward", "std": "std_reward", "min": "min_reward",
               "max": "max_reward", "mean length": "mean_length", "success rate": "success_rate"}
    shown = {col: key for col, key in columns.items() if key in result}
    for col in shown:
        table.add_column(col, justify="right")
    table.add_row(*(f"{result[k]:.2f}" for k in shown.values()))
    console = Console()
    console.print(table)
    if "note" in result:
        console.print(f"note:       {result['note']}")
    console.print(f"checkpoint: {result['checkpoint']} (step {result['global_step']:,})")
    console.print(f"results:    {result['results_path']}")
    if "videos" in result:
        folder = RunDir.of_checkpoint(result["checkpoint"]).eval_videos
        n = len(result["videos"])
        console.print(f"videos:     {folder}/ ({n} episode{'' if n == 1 else 's'})")
        for video in result["videos"]:
            console.print(f"            {Path(video).name}")


if __name__ == "__main__":
    main()
