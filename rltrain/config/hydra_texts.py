"""The wording of Hydra's and OmegaConf's errors that rltrain reads, to say them in one line.

Neither library gives an error code or a field for what these errors are about (which
override, option, value or type), so `overrides.explain`, `compose.py` and `grammar.py` read
the message text through the patterns below, and fall back to the error's first line when none
matches. tests/config/test_hydra_texts.py makes the real Hydra raise each one: a release that
rewords an error fails there, instead of quietly explaining less.
"""

from __future__ import annotations

import re

NO_DEFAULT = re.compile(r"Could not override '([^']+)'\. No match in the defaults list")
"""Hydra: a group the config has no default for (`rltrain eval algo=dqn`): the group."""
NOT_KEY_VALUE = re.compile(r"Error parsing override '([^'=]+)'")
"""Hydra: an argument that is not key=value (`rltrain eval run.pt`): the argument."""
UNKNOWN_KEY = re.compile(r"Key '([^']+)' not in '(\w+)'")
"""OmegaConf: a field its schema lacks (`algo.lrr=1`): the key and the schema's name."""
MISSING_OPTION = re.compile(r"Could not find '([^']+)'")
"""Hydra: an option no config group has (`algo=pppo`): `group/option`."""
OPTION_LINE = re.compile(r"^\t(\S+)$", flags=re.M)
"""Hydra: each of that group's options, on a line of its own after a tab."""
NOT_OPTIONAL = re.compile(r"field '([^']+)' is not Optional")
"""OmegaConf: `key=null` for a field that always holds a value: the key."""
GROUP_NOT_STRING = "Config group override must be a string"
"""Hydra: `env=null`, a group's choice set to null."""
APPEND = re.compile(r"Could not override '([^']+)'\.\s+To append to your config use (\S+)")
"""Hydra: a key a free-form dict does not hold yet (`env.kwargs.foo=1`), and its `+` form."""
OVERRIDE = re.compile(r"Could not override '([^']+)'")
"""Hydra: the key of an override it could not apply (either of the two above)."""
INVALID_TYPE = re.compile(
    r"Invalid (?:type|value) assigned: (\w+) is not (?:a subclass of |an? )?(\w+)")
"""OmegaConf: a value of the wrong kind for a list or a config (`env.wrappers=3`): the kinds."""
NOT_CONVERTED = re.compile(r"Value '(.*)' of type '(\w+)' could not be converted to (\w+)")
"""OmegaConf: a value its field's type cannot take (`algo.lr=abc`): value, its type, the type."""
NOT_VALID = re.compile(r"Value '(.*)' is not a valid (\w+) \(type (\w+)\)")
"""OmegaConf's wording of the same for a bool (`env.normalize_obs=maybe`)."""
FULL_KEY = re.compile(r"full_key: (\S+)")
"""OmegaConf: the dotted key an error is about, on a line of its message."""
LEXER = "LexerNoViableAltException: "
"""Hydra: its lexer stopped at a character (`hydra.run.dir=/tmp/résumé`); the override follows
on the line, and the next line's caret stands under that character."""
