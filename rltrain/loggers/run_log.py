"""A run folder's `train.log`: rltrain's log lines written there while a run (or one seed of a
trial or batch) trains, whatever logging the caller set up."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """Also write the log to `path` meanwhile (each seed's folder gets its own train.log); the
    file is created by the first line logged, so a run refused before it writes nothing.

    The file gets rltrain's INFO lines even where the caller's logging hides them (a root
    logger at WARNING, as in an application or under pytest, or rltrain's own logger set
    higher): rltrain's logger is then lowered to INFO meanwhile, and its records reach the
    caller's handlers only at the level the caller had (`_AsBefore`), so the console and the
    caller's own handlers show what they showed before. The same holds for rltrain's loggers
    that the caller's `logging.config.dictConfig` disabled (its `disable_existing_loggers`,
    on by default): enabled meanwhile, for the file only."""
    handler = _FolderFileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s"))
    root, own = logging.getLogger(), logging.getLogger("rltrain")
    root.addHandler(handler)
    muted = _disabled_loggers("rltrain")
    hidden = bool(muted) or own.getEffectiveLevel() > logging.INFO
    saved = (own.level, own.propagate, list(own.handlers))
    if hidden:
        own.handlers = [_AsBefore(own.getEffectiveLevel(), saved[2], saved[1],
                                  {lg.name for lg in muted})]
        own.setLevel(logging.INFO)
        own.propagate = False
        for lg in muted:
            lg.disabled = False
    try:
        yield
    finally:
        if hidden:
            own.handlers = saved[2]
            own.setLevel(saved[0])
            own.propagate = saved[1]
            for lg in muted:
                lg.disabled = True
        root.removeHandler(handler)
        handler.close()


@contextlib.contextmanager
def root_handlers_kept() -> Iterator[None]:
    """The root logger's level as before the block, and the handlers added to it meanwhile
    removed and closed. Hydra's job logging adds a console and a `train.log` handler to the
    root logger and leaves them there: harmless in the `rltrain` process, which ends with the
    command, but a process that goes on after `main()` (a notebook, a test suite) wrote its
    next run's lines into the last run's `train.log`, and failed once that folder was gone."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


def _disabled_loggers(name: str) -> list[logging.Logger]:
    """The logger `name` and those below it that are disabled (what `dictConfig` does to the
    loggers that exist when it runs and that its config does not name)."""
    return [lg for key, lg in list(logging.root.manager.loggerDict.items())
            if isinstance(lg, logging.Logger) and lg.disabled
            and (key == name or key.startswith(name + "."))]


class _AsBefore(logging.Handler):
    """rltrain's logger while it is lowered to INFO for the run files (`log_to`), standing in
    for its own handlers and its propagation: a record at the caller's level goes where it
    went before (the logger's handlers, then the root's when it propagated), and every record
    goes to the run files. Records of `muted` loggers (disabled by the caller) go to the run
    files only."""

    def __init__(self, threshold: int, handlers: list[logging.Handler], propagate: bool,
                 muted: set[str]):
        super().__init__()
        self.threshold, self.handlers, self.propagate = threshold, handlers, propagate
        self.muted = muted

    def emit(self, record: logging.LogRecord) -> None:
        root = logging.getLogger()
        shown = record.levelno >= self.threshold and record.name not in self.muted
        if shown:
            for h in self.handlers:
                if record.levelno >= h.level:
                    h.handle(record)
        if shown and self.propagate:
            root.handle(record)  # the run files are among the root's handlers
            return
        for h in root.handlers:
            if isinstance(h, _FolderFileHandler):
                h.handle(record)


class _FolderFileHandler(logging.FileHandler):
    """A `FileHandler` opened (with its folder) at its first record, not at construction."""

    def __init__(self, path: Path):
        super().__init__(path, delay=True)

    def _open(self):  # noqa: ANN202 - logging's own signature
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()
