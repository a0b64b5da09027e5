"""How a command ends on bad input or a failed run: one line on stderr and an exit code (2: bad
input, 1: training failed); RLTRAIN_DEBUG=1 raises instead, for the traceback."""

from __future__ import annotations

import os
import sys

EXIT_USAGE = 2
EXIT_TRAINING = 1


def debug() -> bool:
    """RLTRAIN_DEBUG is set: errors raise (with their traceback) instead of one line."""
    return os.environ.get("RLTRAIN_DEBUG", "") not in ("", "0", "false")


def fail(message: str, code: int = 2) -> None:
    """Print one error line and exit with `code` (2: bad input, 1: training failed); under
    torchrun, ranks other than 0 prefix it with their rank."""
    rank = os.environ.get("RANK", "0") if "WORLD_SIZE" in os.environ else "0"
    prefix = f"[rank {rank}] " if rank != "0" else ""
    print(f"{prefix}rltrain: error: {message}", file=sys.stderr)
    sys.exit(code)
