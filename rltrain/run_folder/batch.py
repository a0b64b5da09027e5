"""A batch folder on disk: which seeds it holds, and what `resume=<batch>` continues.

A `num_seeds=N` batch started from the command line records `num_seeds` and `seed` in its
`.hydra/config.yaml`; its seeds live in `seed_<s>/`, each with its own checkpoints. Reading
this needs no torch (it runs before Hydra starts, on the path of every `resume=`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import yaml

from rltrain.checkpoint.run_dir import RunDir
from rltrain.errors import UserError

log = logging.getLogger("rltrain")


def batch_seeds(folder: str | Path) -> list[int] | None:
    """The seeds of the `num_seeds` batch whose folder is `folder`; None when it is not one."""
    config = RunDir(Path(folder)).hydra_config
    if not Path(folder).is_dir() or not config.is_file():
        return None

    try:
        # plain YAML: two top-level numbers (OmegaConf.load took ~50 ms a call; this ~1 ms)
        saved = yaml.load(config.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        count, first = int(saved.get("num_seeds", 1) or 1), int(saved.get("seed", 0) or 0)
    except Exception:  # noqa: BLE001  (an unreadable record: not a batch we can resume)
        return None
    return [first + k for k in range(count)] if count > 1 else None


def resumable_seeds(folder: Path) -> dict[int, Path]:
    """Seed -> its `latest.pt`, for the seeds of the batch in `folder` that have one."""
    seeds = batch_seeds(folder) or []
    found = {s: RunDir(folder).seed(s).latest for s in seeds}
    found = {s: p for s, p in found.items() if p.is_file()}
    if not found:
        raise UserError(f"resume: no seed of the batch in {folder} has a checkpoint "
                        "(seed_<s>/checkpoints/latest.pt) to resume from")
    return found


def batch_overrides(folder: str | Path, overrides: list[str]) -> list[str]:
    """`overrides` of `resume=<batch>` without `num_seeds=` and `seed=` where they restate the
    batch's own values; a different value is refused (a resume continues the same seeds)."""
    seeds = batch_seeds(folder) or []
    own = {"num_seeds": str(len(seeds)), "seed": str(seeds[0]) if seeds else None}
    kept = []
    for arg in overrides:
        key, _, value = arg.lstrip("+~").partition("=")
        if key not in own:
            kept.append(arg)
            continue
        try:
            same = own[key] is not None and int(float(value)) == int(own[key])
        except ValueError:
            same = False
        if not same:
            raise UserError(f"resume={folder}: {arg} would change the batch (it holds "
                            f"{len(seeds)} seeds from seed {seeds[0] if seeds else '?'}); a "
                            f"resume continues the same seeds: leave {key}= out")
    return kept
