"""An agent rebuilt from a checkpoint alone: the checkpoint read and checked, the algorithm
built for an env and its weights loaded. Evaluation, export and resume rebuild agents here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.payload import EVAL
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.registry import get_algo_spec
from rltrain.config.validation import to_train_config
from rltrain.envs.atari import check_frame_layout
from rltrain.envs.make import load_env_state
from rltrain.envs.trust import NamedCode, require_named
from rltrain.envs.vec_env import VecEnv
from rltrain.errors import UserError


def load_checkpoint(ckpt: str | Path, device: str = "cpu", named: NamedCode | None = None,
                    ) -> tuple[Path, dict[str, Any], Any]:
    """(resolved path, payload, validated `TrainConfig`) of a checkpoint file or run dir.

    Refuses a checkpoint whose env names code (a module) that `named` does not name.
    """
    refuse_seed_batch(ckpt)
    path = checkpoint.resolve(ckpt)
    payload = checkpoint.load(path, map_location=device, require=EVAL)
    cfg = to_train_config(payload["config"])
    require_named(cfg.env, named, str(path))
    check_frame_layout(cfg.env, cfg.algo.net.encoder, payload["algo"], str(path))
    return path, payload, cfg


def refuse_seed_batch(ckpt: str | Path) -> None:
    """A one-line `UserError` when `ckpt` is the folder of a several-seed run (`num_seeds=N`):
    it holds one run per seed in `seed_<s>/` and no policy of its own, so name those."""
    batch = RunDir(Path(ckpt).expanduser())
    seeds = batch.seed_folders()
    if not seeds or batch.latest.is_file():
        return
    shown = [f"ckpt={batch.seed(s).root}" for s in seeds[:3]]
    more = f" (or another of its {len(seeds)} seeds)" if len(seeds) > 3 else ""
    raise UserError(f"{batch.root} is a batch of {len(seeds)} seeds, one run each in "
                    f"seed_<s>/, with no policy of its own: pick one, {' or '.join(shown)}{more}")


def build_agent(cfg: Any, env: VecEnv, payload: dict[str, Any], path: Path, device: str) -> Any:
    """The checkpoint's algorithm rebuilt for `env`, weights loaded; `env` gets the stored
    normalizer statistics. Evaluation and export both rebuild agents here.

    Like training, this applies the run's `torch_threads` to the process: with torch's default
    (every core) a 5-env CartPole eval took 6-9 s instead of 0.34 s on a busy 2-core machine.
    """
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    load_env_state(env, payload.get("env", {}))
    algo = get_algo_spec(cfg.algo.name).build(cfg.algo, env.spec, device)
    load_algo(algo, payload["algo"], path)
    return algo


def load_algo(algo: Any, state: dict[str, Any], path: Path) -> None:
    """Load weights into `algo`; a shape mismatch is a one-line `UserError`."""
    try:
        algo.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise UserError(f"{path}: network weights do not match the stored config ({first})") from exc
