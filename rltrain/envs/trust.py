"""User code is named on the command line, never read from a file.

An env config can name Python code in three fields: `env.id` (`module:factory` or
`module:EnvId`), `env.imports` (modules imported so that they register ids) and `env.wrappers`
(`module:Class`). A checkpoint records them, but `rltrain eval`, `export` and `resume=` import
such a module only when the user names it again on that command's line (`env.import=module`, or
`env.id=module:name`); a module the user names must be one the checkpoint recorded, so a typo
cannot run other code. Registered gymnasium ids and `gymnasium.wrappers` classes need nothing.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rltrain.errors import UserError

BUILTIN_MODULES = frozenset({"rltrain.envs.pixels"})
"""rltrain's own env modules (`env=pixel_cartpole`): part of the program, never user code."""


@dataclass(frozen=True)
class NamedCode:
    """What the user named on one command line: modules they trust, and the env id they gave."""

    modules: frozenset[str] = field(default_factory=frozenset)
    env_id: str | None = None


def module_of(name: str) -> str | None:
    """`my_pkg.envs` for `my_pkg.envs:make_maze`; None for a name that carries no module."""
    module, sep, _ = str(name).partition(":")
    return module if sep and module else None


def code_modules(env: Any) -> dict[str, str]:
    """Every module an env config (an `EnvConfig` or its plain dict) names: module -> field."""
    get = env.get if isinstance(env, dict) else lambda k, d=None: getattr(env, k, d)
    found: dict[str, str] = {}
    module = module_of(str(get("id", "")))
    if module:
        found[module] = f"env.id={get('id')}"
    for name in get("imports", None) or []:
        found.setdefault(str(name), f"env.imports=[{name}]")
    for wrapper in get("wrappers", None) or []:
        wname = wrapper.get("name", "") if isinstance(wrapper, dict) else getattr(wrapper, "name", "")
        module = module_of(str(wname))
        if module:
            found.setdefault(module, f"env.wrappers {wname}")
    return found


def named_code(overrides: Iterable[str]) -> NamedCode:
    """The modules and env id named by `env.import=`/`env.imports=`/`env.id=` overrides."""
    # start-up: Hydra only to read a quoted override (`rltrain list` imports this module)
    from hydra.core.override_parser.overrides_parser import OverridesParser

    modules: set[str] = set()
    env_id = None
    for arg in overrides:
        key, sep, _ = arg.lstrip("+~").partition("=")
        if not sep or key not in ("env.import", "env.imports", "env.id"):
            continue
        try:
            (ov,) = OverridesParser.create().parse_overrides([arg.lstrip("+~")])
            value = ov.value()
        except Exception as exc:  # hydra's parse errors are multi-line
            raise UserError(f"cannot parse {arg!r}: {str(exc).splitlines()[0]}") from exc
        if key == "env.id":
            env_id = str(value)
            modules |= {m for m in [module_of(env_id)] if m}
        else:
            modules |= {str(v) for v in (value if isinstance(value, list) else [value])}
    return NamedCode(frozenset(modules), env_id)


def require_named(env: Any, named: NamedCode | None, source: str) -> None:
    """Refuse (one line) to build the env of `source` unless the user named all of its code.

    `env` is the config read from `source` (a checkpoint); `named` is what this command's line
    names (or a Python caller's `named=`; None: nothing). Also refuses names that do not match
    what `source` recorded. The refusal gives both forms of the fix: `env.import=` for the
    command line, `named=NamedCode(...)` for `evaluate` and `export_policy` in Python.
    """
    named = named or NamedCode()
    needed = {m: f for m, f in code_modules(env).items() if m not in BUILTIN_MODULES}
    recorded_id = env.get("id") if isinstance(env, dict) else getattr(env, "id", None)
    if named.env_id is not None and named.env_id != recorded_id:
        raise UserError(f"env.id={named.env_id} does not match {source}'s env.id={recorded_id}; "
                        f"give env.id={recorded_id} or leave env.id out")
    extra = sorted(named.modules - set(needed) - BUILTIN_MODULES)
    if extra:
        uses = ", ".join(sorted(needed)) or "no module of yours"
        raise UserError(f"env.import={extra[0]}: {source}'s env does not use module {extra[0]!r} "
                        f"(it uses {uses}); name only the modules it recorded")
    missing = [m for m in needed if m not in named.modules]
    if missing:
        what = "; ".join(needed[m] for m in missing)
        modules = ", ".join(repr(m) for m in sorted(needed))
        raise UserError(f"{source} names code to run ({what}); rltrain never imports code named "
                        f"in a file: if you trust it, add {import_override(missing)} to this "
                        "command (evaluate or export_policy in Python: named=NamedCode(modules="
                        f"frozenset({{{modules}}})), rltrain.envs.trust)")


def import_override(modules: list[str]) -> str:
    """`env.import=m`, or `env.imports=[a,b]` for several modules."""
    return f"env.import={modules[0]}" if len(modules) == 1 else f"env.imports=[{','.join(modules)}]"


_PLAIN = re.compile(r"[A-Za-z0-9_/.\-+:@%~]+")
"""Characters Hydra's override grammar takes in an unquoted value (a path made of them only)."""


def hydra_value(value: Any) -> str:
    """`value` as an override's value: as it is when Hydra's grammar reads it unquoted, else in
    Hydra's single quotes (a path with spaces, brackets or non-ASCII letters)."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shell_word(text: str) -> str:
    """`text` as one word of a POSIX shell command: bare when safe, else in double quotes
    (readable around Hydra's single quotes), else `shlex.quote`'s."""
    if shlex.quote(text) == text:
        return text
    if not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)


def resume_command(run_dir: Any, env: Any, ranks: int = 1) -> str:
    """`rltrain resume=<run_dir>`, with the `env.import=` that a run of an env of the user's own
    module needs (a resume never imports code its checkpoint names: it must be named again),
    quoted for a POSIX shell where the path needs it (spaces, quotes). A torchrun job's
    (`ranks` > 1) resumes under torchrun again: a plain `rltrain resume=` of it is refused."""
    needed = sorted(m for m in code_modules(env) if m not in BUILTIN_MODULES)
    command = shell_word(f"resume={hydra_value(run_dir)}") + (
        f" {import_override(needed)}" if needed else "")
    if ranks <= 1:
        return f"rltrain {command}"
    if os.environ.get("LOCAL_WORLD_SIZE", str(ranks)) == str(ranks):  # one node
        return f"torchrun --standalone --nproc_per_node={ranks} -m rltrain {command}"
    return f"torchrun <this job's options, {ranks} ranks> -m rltrain {command}"
