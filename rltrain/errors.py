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
