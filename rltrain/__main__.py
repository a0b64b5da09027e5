"""`python -m rltrain ...` (and `torchrun ... -m rltrain ...`): the `rltrain` command."""

from rltrain.cli import main

main()
