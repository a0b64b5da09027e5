"""Python entry point: `rltrain.train(overrides)` composes the config exactly as the CLI does."""

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
    from rltrain.config import register_configs, to_train_config
    from rltrain.overrides import (
        compose_checked,
        env_choices,
        env_import_overrides,
        net_overrides,
        preset_overrides,
    )
    from rltrain.runner.runner import Runner

    if isinstance(overrides, TrainConfig):
        cfg = overrides
    else:
        overrides = preset_overrides(net_overrides(env_import_overrides(list(overrides or []))))
        register_configs(env_choices(overrides))
        cfg = to_train_config(compose_checked("config", overrides))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
    return Runner(cfg, run_dir, algo=algo, callbacks=callbacks).run()
