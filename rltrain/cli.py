"""Command line: `rltrain [overrides]` trains, `rltrain eval ckpt=...` evaluates a checkpoint.

Bad input becomes one line on stderr and exit code 2; set RLTRAIN_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rltrain.errors import UserError

log = logging.getLogger("rltrain")
EXIT_USAGE = 2
_HYDRA_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
                "--shell-completion", "-sc", "--version")


def _debug() -> bool:
    return os.environ.get("RLTRAIN_DEBUG", "") not in ("", "0", "false")


def fail(message: str) -> None:
    """Print one error line and exit with the usage-error code."""
    print(f"rltrain: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def main() -> None:
    """Entry point of the `rltrain` command."""
    argv = sys.argv[1:]
    try:
        if argv[:1] == ["eval"]:
            eval_command(argv[1:])
            return
        train_command(argv)
    except UserError as exc:
        if _debug():
            raise
        fail(str(exc))


def train_command(argv: list[str]) -> None:
    """Validate the overrides, then hand over to Hydra (which also serves --help, --cfg, -m)."""
    from rltrain.config import register_configs
    from rltrain.overrides import check_overrides

    register_configs()
    if not any(a.split("=")[0] in _HYDRA_FLAGS for a in argv):
        check_overrides([a for a in argv if not a.startswith("-")])
    sys.argv = [sys.argv[0], *argv]
    _train_task()


@hydra.main(version_base="1.3", config_path="pkg://rltrain.conf", config_name="config")
def _train_task(cfg: DictConfig) -> float:
    """One training job (a multirun calls it once per job); returns the final eval mean."""
    from hydra.core.hydra_config import HydraConfig

    from rltrain.config import to_train_config
    from rltrain.runner.runner import Runner

    try:
        train_cfg = to_train_config(cfg)
        if train_cfg.preset:
            log.info("applied tuned preset conf/tuned/%s.yaml (your overrides win)", train_cfg.preset)
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        return float(Runner(train_cfg, run_dir).run()["mean_reward"])
    except UserError as exc:
        if _debug():
            raise
        fail(str(exc))
        raise  # unreachable: fail() exits


def eval_command(argv: list[str]) -> dict:
    """`rltrain eval ckpt=... [episodes=N deterministic=false seed=S device=...]`."""
    from rltrain.config import register_configs
    from rltrain.evaluate import evaluate
    from rltrain.overrides import compose_checked

    register_configs()
    cfg = compose_checked("eval", argv)
    result = evaluate(cfg.ckpt, episodes=cfg.episodes, deterministic=cfg.deterministic,
                      seed=cfg.seed, device=cfg.device, num_envs=cfg.num_envs)
    _print_eval_table(result)
    return result


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


if __name__ == "__main__":
    main()
