"""Which replay an off-policy run stores its transitions in, and how its saved state is read.

The algorithm's config names it (`algo.replay`: `auto`, or a key of `REPLAYS`; an algorithm
with a replay of its own overrides `OffPolicyConfig.replay_path`). Everything else about a
replay is declared once, in its class: `build(spec, cfg, device, obs_dtype)` (what it stores),
`sample(batch_size, generator)` (how it samples), `state_dict()` / `load_state_dict()` and
`STATE` (what its checkpoint holds: field -> kind, read by `checkpoint/payload.py`),
`check_state(state)` (what its fields must agree on) and `fit_rows(state, spec)` (what the env
a run resumes with must fit). So a new replay (hindsight, prioritized) is one new file and one
entry here (`runner/off_policy.py` `make_replay` builds it). Torch-free at import: the config
validation reads `REPLAYS`.
"""

from __future__ import annotations

import importlib
from typing import Any

REPLAYS: dict[str, str] = {
    "uniform": "rltrain.buffers.replay:ReplayBuffer",
    "frames": "rltrain.buffers.frame_replay:FrameReplayBuffer",
    "her": "rltrain.buffers.her:HerReplayBuffer",
}
"""`algo.replay` name -> `module:Class` (code, never a name read from a file)."""

HER_STRATEGIES = ("future", "final", "episode")
"""`algo.her_goal_selection_strategy`: which step of the episode a relabelled goal is taken
from (`buffers/her.py`)."""


class BadState(ValueError):
    """A saved replay state that does not hold together: `args = (field, what is wrong)`."""


def replay_class(path: str) -> Any:
    """The class at `module:Class`."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def resolved(spec: Any, cfg: Any, stored_uint8: bool) -> str:
    """The `REPLAYS` name `cfg.replay` stands for: `auto` is the frame replay for frame-stacked
    pixel observations stored as bytes (each frame stored once), the uniform one otherwise."""
    if cfg.replay != "auto":
        return str(cfg.replay)
    frames = (spec.frame_stack > 0 and stored_uint8 and len(spec.obs_shape) == 3
              and not spec.obs_entries)
    return "frames" if frames else "uniform"


def saved_replay_class(state: dict[str, Any]) -> Any:
    """The class whose `state_dict()` `state` is, for the checks of a checkpoint read before
    any run is built: of the `REPLAYS` classes whose `STATE` fields `state` all holds, the one
    declaring the most (the HER replay's are the uniform ring's and more); the uniform one when
    none fits (its checks then name the missing field). A replay saved by another class is
    checked by the run's own replay when it loads it."""
    fits = [cls for cls in map(replay_class, REPLAYS.values()) if set(cls.STATE) <= set(state)]
    return max(fits, key=lambda cls: len(cls.STATE), default=replay_class(REPLAYS["uniform"]))
