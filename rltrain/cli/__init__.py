"""The `rltrain` command (`rltrain.cli:main`, `python -m rltrain`, `python -m rltrain.cli`).

    commands.py    `main`: train (default), eval, export, report, list
    train.py       the training command: overrides checked, run folder claimed (`rltrain.run_folder`),
                   Hydra's job
    exit.py        one error line and an exit code
    help.py        `--help` without Hydra's slow group listing
    listing.py     `rltrain list`
    docs.py        the config reference, `python -m rltrain.cli.docs > docs/config.md`
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":  # the package imports none of its modules: `launch` and `api` use some
        # start-up and cycles: the package imports none of its modules (`launch` and `api` use some)
        from rltrain.cli.commands import main

        return main
    raise AttributeError(f"module 'rltrain.cli' has no attribute {name!r}")
