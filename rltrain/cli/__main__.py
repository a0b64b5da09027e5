"""`python -m rltrain.cli ...`: the `rltrain` command."""

from rltrain.cli.commands import main

main()
