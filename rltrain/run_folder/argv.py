"""Reading a job's override list (the command line's, or the list given to `rltrain.train()`):
which arguments are overrides, the value of one, Hydra's quoting, and whether it is a multirun."""

from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Quote, QuotedString

HYDRA_FLAGS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
               "--shell-completion", "-sc", "--version")
"""Hydra's flags that print something instead of running a job."""


def is_override(arg: str) -> bool:
    """Whether a command-line argument is a Hydra override (`key=value`, `+key=`, `~key`), not a
    flag (`-m`, `--cfg`) or a flag's value (`job`)."""
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def with_overrides(argv: list[str], items: list[str]) -> list[str]:
    """`argv` with `items` placed after its last override: Hydra reads the overrides as one
    run of arguments, so items after a trailing flag (`... -m`) were "unrecognized"."""
    last = max((i for i, a in enumerate(argv) if is_override(a)), default=len(argv) - 1)
    return [*argv[:last + 1], *items, *argv[last + 1:]]


def arg_value(argv: list[str], key: str) -> str | None:
    """The value of the last `key=value` in `argv` (None when absent), without the quotes
    Hydra's grammar takes off a quoted value (`resume='/runs/my run'`, see `unquote`)."""
    values = [a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith(f"{key}=")]
    return unquote(values[-1]) if values else None


def unquote(value: str) -> str:
    """`value` as Hydra's override grammar reads it when it is one quoted string (`'a b'` or
    `"a b"`, escapes such as `\\'` resolved): what the job's config will hold. Anything else
    is returned as typed. A path with spaces or non-ASCII letters must be quoted on a Hydra
    command line, so every raw `key=value` read here (a run folder, `resume=`) goes through
    this: the quotes kept, `resume='/runs/été'` looked for a folder named `'/runs/été'`."""
    if len(value) < 2 or value[0] not in "'\"" or value[-1] != value[0]:
        return value

    try:
        parsed = OverridesParser.create().parse_override(f"key={value}").value()
    except Exception:  # noqa: BLE001 - not one quoted string (`'a' 'b'`): Hydra reports it
        return value
    return parsed if isinstance(parsed, str) else value


def hydra_quoted(value: str) -> str:
    """`value` written so that Hydra's override grammar reads it back unchanged: as typed
    when it can (`outputs/2024-01-01/10-00-00`), else quoted (`'/runs/my runs/été'`: Hydra
    refuses non-ASCII letters unquoted)."""
    try:
        if OverridesParser.create().parse_override(f"key={value}").value() == value:
            return value
    except Exception:  # noqa: BLE001 - not readable unquoted
        pass
    return QuotedString(text=value, quote=Quote.single).with_quotes()


def budget(argv: list[str]) -> float | None:
    """`total_timesteps=` of the command line, if it gives a number."""
    value = arg_value(argv, "total_timesteps")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def is_multirun(argv: list[str]) -> bool:
    """`-m`, or what implies it: a search (`+hpo=<algo>`: conf/hpo sets `hydra.mode: MULTIRUN`)
    or `hydra.mode=MULTIRUN` itself."""
    for arg in argv:
        key, _, value = arg.partition("=")
        if arg in ("-m", "--multirun") or (key.lstrip("+") == "hpo" and not key.startswith("~")) \
                or (key.lstrip("+") == "hydra.mode" and value == "MULTIRUN"):
            return True
    return False
