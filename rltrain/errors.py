"""The exceptions the CLI turns into one line: `UserError` (exit 2), `TrainingError` (exit 1)."""

# SAC, TD3 and DDPG have no max_grad_norm field: the hint must not suggest a typo override to them
NONFINITE_HINT = ("try a lower algo.lr, scaled rewards (env.normalize_reward=true) or, for PPO, "
                  "A2C and DQN, a tighter algo.max_grad_norm")


class UserError(ValueError):
    """Bad input from the user: the message is one actionable line."""


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. a non-finite loss); the message is one line with a hint."""


class EnvError(TrainingError):
    """The environment failed (raised, or returned what its spaces forbid): one line naming it."""


class DiskFull(TrainingError):
    """A full disk, as one line: where it struck and what to do once space is freed (`then`)."""

    def __init__(self, where: str, then: str):
        super().__init__(f"disk full while writing the run{where}: {then}")
        self.where = where
        """` (<file>)` of the write that failed, or '' when the error did not name one."""

    def then(self, advice: str) -> "DiskFull":
        """The same full disk, with other advice (a search says how to continue the search)."""
        return DiskFull(self.where, advice)
