"""What an Optuna search learned, as pictures and one command: for the study stored in a sweep
folder's `optuna.db`, Optuna's own matplotlib plots of the optimisation history, the parameter
importances and the parallel coordinates, and `best_trial.txt`, the command line that trains the
best trial's configuration again (checked by composing it)."""

from __future__ import annotations

import logging
import math
import shlex
import warnings
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from rltrain.errors import UserError
from rltrain.text import dotted

log = logging.getLogger("rltrain")
STUDY_DB = "optuna.db"
BEST_TRIAL = "best_trial.txt"
PLOTS = ("history", "importances", "parallel")
"""optuna_<name>.png: Optuna's own optimisation-history plot; the parameter importances (Optuna's
mean-decrease-impurity evaluator) and the parallel coordinates drawn here, because Optuna 2.10's
matplotlib versions of those two (the newest Optuna the Hydra sweeper allows) fail on current
matplotlib (`cm.get_cmap` is gone, the colorbar has no Axes) and its fANOVA on current
scikit-learn."""
SEARCH_ONLY = ("hydra.sweep.subdir",)
"""Trial parameters that are bookkeeping of the search (the trial-folder hook), not choices."""


def write_study_report(folder: Path, out: Path | None = None) -> list[Path]:
    """The PNGs and `best_trial.txt` of the study in `folder/optuna.db` (none without one),
    written into `out` (default: `folder`). A plot that cannot be drawn (scikit-learn missing,
    nothing searched) is one warning line."""
    out = out or folder
    if not (folder / STUDY_DB).is_file():
        return []
    try:
        # optional extra: optuna, for a search's report only (`pip install "rltrain[sweep]"`)
        import optuna
    except ImportError:
        log.warning("%s: the study plots need optuna: pip install \"rltrain[sweep]\"", folder)
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{folder / STUDY_DB}"
    written = []
    for summary in optuna.study.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if not complete:
            log.warning("study %s: no completed trial yet, nothing to plot", study.study_name)
            continue
        written += _plots(study, out)
        best = out / BEST_TRIAL
        best.write_text(best_trial_text(study, folder) + "\n")
        written.append(best)
    return written


def _plots(study: Any, folder: Path) -> list[Path]:
    # start-up: matplotlib (about a second) only when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # (after choosing the headless backend)

    written = []
    for name, draw in (("history", _history), ("importances", _importances),
                       ("parallel", _parallel)):
        try:
            with warnings.catch_warnings():  # Optuna marks its plots and evaluators experimental
                warnings.simplefilter("ignore")
                figure = draw(study)
        except (ImportError, ValueError, RuntimeError) as exc:
            reason = "needs scikit-learn (rltrain[sweep])" if isinstance(exc, ImportError) else exc
            log.warning("study %s: no %s plot: %s", study.study_name, name, reason)
            continue
        path = folder / f"optuna_{name}.png"
        figure.set_size_inches(9, 5.5)
        figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def _history(study: Any) -> Any:
    # optional extra: optuna, for a search's report only (`pip install "rltrain[sweep]"`)
    from optuna.visualization.matplotlib import plot_optimization_history

    return plot_optimization_history(study).figure


def _importances(study: Any) -> Any:
    # start-up: matplotlib (about a second) only when a figure is drawn; optuna, an optional extra
    import matplotlib.pyplot as plt
    from optuna.importance import MeanDecreaseImpurityImportanceEvaluator, get_param_importances

    params = _searched(study)
    scores = get_param_importances(study, evaluator=MeanDecreaseImpurityImportanceEvaluator(seed=0),
                                   params=params)
    names = list(scores)[::-1]  # the most important on top
    figure, axes = plt.subplots()
    axes.barh(names, [scores[n] for n in names], color="tab:blue")
    for y, name in enumerate(names):
        axes.text(scores[name], y, f" {scores[name]:.2f}", va="center")
    axes.set_xlabel("importance for the objective (mean decrease in impurity, sums to 1)")
    axes.set_title(f"{study.study_name}: hyperparameter importances")
    return figure


def _parallel(study: Any) -> Any:
    """One line per completed trial across one vertical axis per parameter (each scaled to its
    search range, log ranges in log), coloured by the objective; the best trial drawn thick."""
    # start-up: matplotlib (about a second) only when a figure is drawn; optuna, an optional extra
    import matplotlib.pyplot as plt
    import optuna

    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    params = _searched(study)
    if not params:
        raise ValueError("no searched parameter")
    values = [t.value for t in trials]
    lo, hi = min(values), max(values)
    cmap = plt.get_cmap("viridis")
    figure, axes = plt.subplots()
    best = study.best_trial.number
    for trial in sorted(trials, key=lambda t: t.number == best):  # the best one on top
        ys = [_position(trial, p) for p in params] + [(trial.value - lo) / (hi - lo or 1)]
        bold = trial.number == best
        axes.plot(range(len(ys)), ys, color="black" if bold else cmap(ys[-1]),
                  linewidth=2.5 if bold else 1, alpha=1 if bold else 0.7)
    names = [*params, "objective"]
    axes.set_xticks(range(len(names)), [n.removeprefix("algo.") for n in names], rotation=20)
    for x, name in enumerate(names):
        axes.axvline(x, color="grey", linewidth=0.5)
        low, high = _range(study, name, lo, hi)
        axes.text(x, -0.04, _short(low), ha="center", va="top", fontsize=8)
        axes.text(x, 1.04, _short(high), ha="center", va="bottom", fontsize=8)
    axes.set_ylim(-0.12, 1.12)
    axes.set_yticks([])
    axes.set_title(f"{study.study_name}: {len(trials)} trials (best, trial {best}, in black)",
                   pad=18)
    return figure


def _searched(study: Any) -> list[str]:
    """The parameters the search chose (by name), without its bookkeeping ones."""
    names = {name for t in study.trials for name in t.params}
    return sorted(n for n in names if n not in SEARCH_ONLY)


def _position(trial: Any, name: str) -> float:
    """`trial`'s value of `name` within its search range, 0..1 (log ranges in log space)."""
    if name not in trial.params:
        return math.nan
    dist, value = trial.distributions[name], trial.params[name]
    if hasattr(dist, "choices"):
        return dist.choices.index(value) / max(len(dist.choices) - 1, 1)
    low, high = float(dist.low), float(dist.high)
    if type(dist).__name__.startswith("Log") or getattr(dist, "log", False):
        low, high, value = math.log(low), math.log(high), math.log(value)
    return (value - low) / (high - low) if high > low else 0.5


def _range(study: Any, name: str, lo: float, hi: float) -> tuple[Any, Any]:
    """The ends of an axis: the search range of a parameter, or the objective's min and max."""
    if name == "objective":
        return lo, hi
    dist = next(t.distributions[name] for t in study.trials if name in t.distributions)
    if hasattr(dist, "choices"):
        return dist.choices[0], dist.choices[-1]
    return dist.low, dist.high


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def best_trial_text(study: Any, folder: Path) -> str:
    """`# best of N trials: trial 7, value 412.3` and the command line that trains it again."""
    best = study.best_trial
    head = (f"# study {study.study_name}: best of {len(study.trials)} trials is trial {best.number}"
            f" (value {best.value:.4g}); its configuration as one run:")
    return f"{head}\n{best_command(folder / str(best.number))}"


def best_command(trial_dir: Path) -> str:
    """`rltrain algo=ppo algo.lr=0.00064 ...`: the trial's own overrides without the search
    (`hpo`, `hydra.*`), with the algorithm the search preset chose; any value still composing
    differently from the trial's saved config is added as an override of its own."""
    overrides_file, config_file = trial_dir / ".hydra" / "overrides.yaml", trial_dir / ".hydra" / "config.yaml"
    if not overrides_file.is_file() or not config_file.is_file():
        raise UserError(f"{trial_dir}: no .hydra/overrides.yaml and config.yaml to rebuild the trial from")
    overrides = [o for o in yaml.safe_load(overrides_file.read_text()) or []
                 if not o.lstrip("+~").startswith(("hpo=", "hydra.", "hydra/"))]
    saved = dotted(_validated(yaml.safe_load(config_file.read_text())))
    if not any(o.startswith("algo=") for o in overrides):
        overrides.insert(0, f"algo={saved['algo.name']}")
    for key, value in sorted(_differences(overrides, saved).items()):
        overrides.append(f"{key}={_hydra_value(value)}")
    return "rltrain " + " ".join(shlex.quote(o) for o in overrides)


def _validated(composed: dict[str, Any]) -> dict[str, Any]:
    """A trial's saved (composed) config as the run used it: validated, defaults filled in."""
    # start-up: the config package only for a search's best trial (`rltrain report` of runs)
    from rltrain.config.schema import config_to_dict
    from rltrain.config.validation import to_train_config

    return config_to_dict(to_train_config(OmegaConf.create(composed)))


def _differences(overrides: list[str], saved: dict[str, Any]) -> dict[str, Any]:
    """The saved values that composing `overrides` does not give back."""
    # start-up: the config package only for a search's best trial (`rltrain report` of runs)
    from rltrain.config.compose import compose_train_config
    from rltrain.config.schema import config_to_dict

    composed = dotted(config_to_dict(compose_train_config(overrides)))
    return {key: value for key, value in saved.items() if composed.get(key, value) != value}


def _hydra_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return str(value)

