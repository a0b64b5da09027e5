"""What a benchmark prints and saves at its end: its table on the console and, with `--out DIR`,
`DIR/<name>.md` and `DIR/<name>.json` (the data the table was made from)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report(name: str, data: Any, text: str, out: str | Path | None) -> None:
    """Print `text`; with `out`, write it to `<out>/<name>.md` and `data` to `<name>.json`
    (`out` made first: a measurement that took an hour is not lost to a missing folder)."""
    print(text)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, f"{name}.md").write_text(text)
        Path(out, f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
