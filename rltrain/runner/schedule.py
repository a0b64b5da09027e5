"""When to log, evaluate and checkpoint: the next env step at which each is due."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Schedule:
    """Next due env step of each periodic task; a frequency of 0 means never (log: every time).

    Checkpoints store `state_dict()` (the plain dict `{"eval", "ckpt", "log"}` of ints) so a
    resumed run evaluates, checkpoints and logs at the same steps as an uninterrupted one.
    """

    eval_freq: int
    ckpt_freq: int
    log_freq: int
    next_eval: int = 0
    next_ckpt: int = 0
    next_log: int = 0

    @classmethod
    def every(cls, eval_freq: int, ckpt_freq: int, log_freq: int) -> Schedule:
        """A fresh schedule: the first eval and checkpoint after one period, a log at once."""
        return cls(eval_freq, ckpt_freq, log_freq, next_eval=eval_freq, next_ckpt=ckpt_freq)

    def due_log(self, step: int) -> bool:
        """True when a log is due at `step`; the next one is then `log_freq` steps later."""
        if step < self.next_log:
            return False
        self.next_log = step + self.log_freq
        return True

    def due_eval(self, step: int) -> bool:
        """True when an evaluation is due at `step`; advances by one period (stays on its grid)."""
        if not self.next_eval or step < self.next_eval:
            return False
        self.next_eval += self.eval_freq
        return True

    def due_ckpt(self, step: int) -> bool:
        """True when a periodic checkpoint is due at `step`; advances by one period."""
        if not self.next_ckpt or step < self.next_ckpt:
            return False
        self.next_ckpt += self.ckpt_freq
        return True

    def saves_at(self, step: int) -> bool:
        """True when an evaluation or a periodic checkpoint is due at `step` (nothing advances:
        a seed batch asks this to copy each seed's weights back only when they are read)."""
        return bool((self.next_eval and step >= self.next_eval)
                    or (self.next_ckpt and step >= self.next_ckpt))

    def state_dict(self) -> dict[str, int]:
        """The next due steps, as the checkpoint key `schedule` stores them."""
        return {"eval": self.next_eval, "ckpt": self.next_ckpt, "log": self.next_log}

    def load_state_dict(self, saved: dict[str, int]) -> None:
        """Continue from a checkpoint's `schedule` (the frequencies stay this run's)."""
        self.next_eval, self.next_ckpt, self.next_log = saved["eval"], saved["ckpt"], saved["log"]
