"""`rltrain list` (or `rltrain --list`): algorithms, env aliases with their tuned presets, and
optional extras, installed or not, in one rich table. Imports neither torch nor Hydra."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rltrain.config.catalog import (
    ALGORITHMS,
    EXTRAS,
    SPACE_NAMES,
    algo_options,
    env_family,
    env_files,
    missing_modules,
    presets,
)
from rltrain.envs.aliases import ENV_ALIASES


def listing_table() -> Table:
    """The table `rltrain list` prints."""
    table = Table(title="rltrain: what `algo=`, `env=` and the extras offer", title_justify="left")
    table.add_column("", style="bold")
    table.add_column("name", style="cyan", no_wrap=True)
    table.add_column("details")
    for option in algo_options():
        built = "" if option.algo == option.option else f"algo {option.algo}, "
        entry = ALGORITHMS.get(option.algo)
        if entry is None:  # a YAML of an algorithm added without its entry
            table.add_row("algo", option.option, f"{option.summary} ({built}it has no entry in "
                                                 f"rltrain/config/catalog.py ALGORITHMS)")
            continue
        family = entry.family
        spaces = ", ".join(SPACE_NAMES[k] for k in entry.action_kinds)
        table.add_row("algo", option.option, f"{option.summary} ({built}{family.replace('_', '-')}; "
                                             f"actions: {spaces})")
    table.add_section()
    tuned = presets()
    for alias, env_id in ENV_ALIASES.items():  # every Atari game gets the `<algo>_atari` presets
        key = "atari" if env_family(env_id) == "atari" else alias
        table.add_row("env", alias, _env_details(env_id, tuned.get(key, [])))
    for option, env_id in env_files().items():  # e.g. pixel_cartpole: a YAML, not an alias
        table.add_row("env", option, _env_details(env_id, tuned.get(option, [])))
    if "atari" in tuned:
        table.add_row("env", "ALE/<Game>-v5", _env_details("ALE/Pong-v5", tuned["atari"], "any Atari game"))
    table.add_section()
    for extra, (what, _) in EXTRAS.items():
        missing = missing_modules(extra)
        state = "[green]installed[/]" if not missing else f"[red]missing[/] ({', '.join(missing)})"
        table.add_row("extra", extra, f"{what}: {state}")
    return table


def _env_details(env_id: str, algos: list[str], name: str | None = None) -> str:
    extra = env_family(env_id)
    parts = [name or env_id]
    if extra:
        parts.append(f"extra {extra}" + ("" if not missing_modules(extra) else " (missing)"))
    parts.append("tuned: " + ", ".join(algos) if algos else "no tuned preset")
    return " · ".join(parts)


def print_listing(console: Console | None = None) -> None:
    """Print the table to the terminal (or `console`)."""
    (console or Console()).print(listing_table())
