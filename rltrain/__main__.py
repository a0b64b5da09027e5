"""`python -m rltrain ...` (and `torchrun ... -m rltrain ...`): the `rltrain` command."""

from rltrain.cli.commands import main

main()
