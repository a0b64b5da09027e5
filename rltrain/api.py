"""Python entry point: `rltrain.train(overrides)` composes the config exactly as the CLI does
(`rltrain.compose.compose_train_config`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rltrain.config import TrainConfig

log = logging.getLogger("rltrain")


def train(overrides: list[str] | TrainConfig | None = None, run_dir: str | Path | None = None,
          algo: Any = None, callbacks: dict[str, list] | None = None) -> dict[str, Any]:
    """Train from Hydra-style overrides (`["algo=ppo", "env=CartPole-v1", "net.hidden=[32]"]`)
    or a `TrainConfig`.

    Returns the final evaluation result (`mean_reward`, `std_reward`, ...). `algo=` trains an
    algorithm built in Python instead of the one the config would build.
    """
    from rltrain.compose import compose_train_config
    from rltrain.runner.runner import Runner

    cfg = overrides if isinstance(overrides, TrainConfig) else compose_train_config(overrides)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
    if cfg.num_seeds > 1:
        return _train_seeds(cfg, run_dir, algo, callbacks)
    return Runner(cfg, run_dir, algo=algo, callbacks=callbacks).run()


def _train_seeds(cfg: TrainConfig, run_dir: str | Path | None, algo: Any,
                 callbacks: dict[str, list] | None) -> dict[str, Any]:
    """`num_seeds > 1`: the batch summary (`mean_reward` is the IQM of the seeds' final evals)."""
    from rltrain.errors import UserError
    from rltrain.runner.setup import default_run_dir
    from rltrain.seeds.runner import SeedRunner

    if algo is not None or callbacks:
        raise UserError("num_seeds > 1 builds one algorithm per seed itself: train(algo=...) and "
                        "callbacks= need num_seeds=1")
    return SeedRunner(cfg, run_dir if run_dir is not None else default_run_dir()).run()
