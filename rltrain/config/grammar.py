"""What Hydra's override grammar cannot read, said in one line that shows how to write it.

Hydra's lexer takes unquoted values in a small ASCII alphabet (letters, digits and `/-+.$%*@?|`
among others); anything else, `é` in `hydra.run.dir=/tmp/résumé` included, stops it with a bare
`LexerNoViableAltException`. Inside quotes it takes any character.
"""

from __future__ import annotations

from rltrain.config.hydra_texts import LEXER


def grammar_refusal(exc: BaseException) -> str | None:
    """One line for an override Hydra's lexer stopped at: the character, and the override as a
    shell passes it quoted (`'hydra.run.dir="/tmp/résumé"'`); None for any other error."""
    lines = str(exc).splitlines()
    if len(lines) < 2 or not lines[0].startswith(LEXER) or "^" not in lines[1]:
        return None
    text = lines[0][len(LEXER):]
    at = lines[1].index("^") - len(LEXER)  # Hydra's caret, under the first unread character
    key, _, value = text.partition("=")
    if not 0 <= at < len(text) or at <= len(key) or value[:1] in ("'", '"'):
        return f"cannot parse {text}: see https://hydra.cc/docs/advanced/override_grammar/basic"
    bad = text[at]
    what = f"{bad!r} (not ASCII)" if not bad.isascii() else repr(bad)
    return f"cannot parse {text}: Hydra reads {what} only inside quotes; {_quoted(key, value)}"


def _quoted(key: str, value: str) -> str:
    """How to pass `key=value` with the value quoted for Hydra, through a POSIX shell."""
    if "'" in value or '"' in value:
        return "quote the value for Hydra (key=\"value\") and quote that for your shell"
    return f"in a shell: '{key}=\"{value}\"'"
