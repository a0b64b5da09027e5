"""Schedule: when to log, evaluate and checkpoint, and its round-trip through a checkpoint."""

from __future__ import annotations

from rltrain.runner.schedule import Schedule


def due_steps(due, steps) -> list[int]:
    """The steps among `steps` at which `due(step)` says yes, asked in order."""
    return [s for s in steps if due(s)]


def test_eval_and_checkpoint_stay_on_their_grid_and_zero_means_never():
    sched = Schedule.every(eval_freq=100, ckpt_freq=0, log_freq=0)
    steps = range(32, 400, 32)  # iterations of 32 env steps
    assert due_steps(sched.due_eval, steps) == [128, 224, 320]  # first step past 100, 200, 300
    assert due_steps(sched.due_ckpt, steps) == []


def test_logging_is_due_at_once_then_every_log_freq_steps_after_the_last_log():
    sched = Schedule.every(eval_freq=0, ckpt_freq=0, log_freq=50)
    assert due_steps(sched.due_log, range(32, 260, 32)) == [32, 96, 160, 224]


def test_state_dict_is_the_plain_checkpoint_dict_and_restores_the_next_due_steps():
    sched = Schedule.every(eval_freq=100, ckpt_freq=64, log_freq=10)
    assert sched.state_dict() == {"eval": 100, "ckpt": 64, "log": 0}
    for step in (64, 128):
        sched.due_log(step), sched.due_eval(step), sched.due_ckpt(step)
    saved = sched.state_dict()
    assert saved == {"eval": 200, "ckpt": 192, "log": 138}
    resumed = Schedule.every(eval_freq=100, ckpt_freq=64, log_freq=10)
    resumed.load_state_dict(saved)
    assert resumed == sched


def test_saves_at_peeks_without_advancing():
    s = Schedule.every(eval_freq=100, ckpt_freq=250, log_freq=10)
    assert not s.saves_at(99)
    assert s.saves_at(100) and s.saves_at(100)  # asking twice changes nothing
    assert s.due_eval(100) and not s.saves_at(150)
    assert s.saves_at(250)
    assert not Schedule.every(0, 0, 10).saves_at(10**9)  # never evaluates, never checkpoints
