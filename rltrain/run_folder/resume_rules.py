"""The config rules of `resume=`: which overrides a resumed run may take (budget, logging,
evaluation, checkpoint cadence, the learning-rate decay), and the config it trains with; any
override that would change the experiment is refused in one line."""

from __future__ import annotations

from typing import Any

from rltrain.config.schema import TrainConfig
from rltrain.config.validation import to_train_config
from rltrain.envs.trust import named_code, require_named
from rltrain.errors import UserError

# Overrides that may change when resuming: budgets, logging, evaluation and checkpoint cadence,
# and how the update runs (compiled or not, denormals flushed or not: the same math within
# rounding).
RESUMABLE = ("total_timesteps", "progress", "device", "torch_threads", "flush_denormal", "compile",
             "compile_cache", "logger", "eval", "checkpoint", "resume", "hydra")
SCHEDULE = ("algo.lr_decay_steps", "algo.lr_final")
"""The off-policy learning-rate schedule, which may change with the budget when resuming (the
saved config holds it resolved: `${total_timesteps}` does not follow a new budget by itself)."""


def resume_config(saved: dict[str, Any], composed: dict[str, Any], overrides: list[str],
                  source: str = "the checkpoint") -> TrainConfig:
    """The saved config with the harmless overrides applied; refuse any that change the experiment.

    Code the saved env names (a module) must be named again in `overrides` (`envs/trust.py`).
    """
    env = saved.get("env")
    require_named(env if isinstance(env, dict) else {}, named_code(overrides), source)
    merged = dict(saved)
    for item in overrides:
        key = item.lstrip("+~").split("=", 1)[0]
        top = key.split(".")[0].split("/")[0]
        if key in ("env.import", "env.imports"):  # names trusted code; checked just above
            continue
        if item == "~tuned":  # added beside a repeated env.id= (normalize_overrides): a resume
            continue          # applies no preset anyway
        if key in SCHEDULE and _get(saved, key) is not _ABSENT \
                and _get(composed, key) is not _ABSENT:
            merged["algo"] = {**merged["algo"], key.split(".")[1]: _get(composed, key)}
            continue
        if top not in RESUMABLE:
            old, new = _get(saved, key), _get(composed, key)
            only = (f"only {', '.join(RESUMABLE[:-2])} and the learning-rate decay "
                    f"({', '.join(SCHEDULE)}) may change when resuming")
            if old is _ABSENT and new is _ABSENT:  # a preset group (debug=, tuned=): not a value
                raise UserError(f"resume: `{item}` selects a preset, which cannot be applied to a "
                                f"resumed run; {only}")
            if old != new:
                old, new = (None if v is _ABSENT else v for v in (old, new))
                raise UserError(
                    f"resume: `{item}` would change the experiment ({key}: {old!r} -> {new!r}); "
                    f"{only}")
            continue
        if top in composed and top != "hydra":
            merged[top] = composed[top]
    cfg = to_train_config(merged, here=True)  # a resumed run trains on this machine
    _check_decay_covers(saved, cfg)
    return cfg


def _check_decay_covers(saved: dict[str, Any], cfg: TrainConfig) -> None:
    """Refuse a budget that goes on past a learning-rate decay to 0 which covered the run (its
    `${total_timesteps}`, resolved when the run started): the steps after it would learn
    nothing."""
    steps, final = getattr(cfg.algo, "lr_decay_steps", 0), getattr(cfg.algo, "lr_final", None)
    before = saved.get("total_timesteps")
    if not steps or final != 0 or not isinstance(before, (int, float)):
        return
    if before <= steps < cfg.total_timesteps:
        raise UserError(
            f"resume: total_timesteps={cfg.total_timesteps:g} goes past algo.lr_decay_steps="
            f"{steps:g}, where the learning rate reaches algo.lr_final=0: the steps after it "
            f"would learn nothing; add algo.lr_decay_steps={cfg.total_timesteps:g} to stretch "
            f"the decay over the new budget, or algo.lr_final=<rate> to go on at that rate")


_ABSENT = object()  # a key that is not in the config (as opposed to one set to None)


def _get(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    if key in ("algo", "env", "tuned"):  # a group choice: compare what it selects
        key = {"algo": "algo.name", "env": "env.id", "tuned": "preset"}[key]
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node
