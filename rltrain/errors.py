"""The one exception type that the CLI turns into a one-line message and exit code 2."""


class UserError(ValueError):
    """Bad input from the user: the message is one actionable line."""


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a non-finite loss); the message is one line with a hint."""


class EnvError(TrainingError):
    """The environment failed (raised, or returned what its spaces forbid): one line naming it."""
