"""The Runner's side of periodic evaluations in a second process (`eval.background`; the
evaluator itself is `evaluation/background.py`): start it where the run wants one, hand it a
snapshot when an evaluation is due, take its results back (logged at the snapshot's step,
`best.pt` from the evaluated weights, written by the Runner), and end it with the run."""

from __future__ import annotations

import logging
import time
from typing import Any

from rltrain.envs.make import env_state
from rltrain.evaluation.background import (
    START_TIMEOUT_S,
    BackgroundEvaluator,
    EvaluatorFailed,
    Snapshot,
    cpu_copy,
    wanted,
)
from rltrain.runner.guards import check_weights
from rltrain.runner.restore import make_payload

log = logging.getLogger("rltrain")


class BackgroundEvals:
    """`runner`'s background evaluations (none unless `start()` found them wanted).
    `rebuildable`: the evaluator can rebuild the algorithm from the config (not one built in
    Python); `allowed` is False for a seed of a batch (it evaluates in the training process)."""

    def __init__(self, runner: Any, rebuildable: bool, allowed: bool = True):
        self.runner, self.rebuildable, self.allowed = runner, rebuildable, allowed
        self.evaluator: BackgroundEvaluator | None = None

    def start(self) -> None:
        """The evaluator, where `eval.background` and this run want one."""
        r = self.runner
        cfg = r.cfg
        if r.main and not r.state.stop and self.allowed and wanted(
                cfg.eval.background, r.state.total_timesteps - r.state.global_step,
                cfg.eval.freq, cfg.torch_threads, r.collective.world.size == 1, self.rebuildable):
            self.evaluator = BackgroundEvaluator(r.config_dict)
            log.info("periodic evaluations run in a second process while training goes on "
                     "(eval.background=%s; the final one runs here)", cfg.eval.background)

    def submit(self, step: int) -> bool:
        """Hand the policy at `step` to the evaluator, or skip this evaluation (said once)
        while the previous one still runs. False when there is no evaluator (or it is gone,
        said once): the Runner evaluates in its own process."""
        if self.evaluator is None:
            return False
        r = self.runner
        check_weights(r.algo, step)
        payload = cpu_copy(make_payload(r.ctx, r.schedule, r.config_dict, False))
        snapshot = Snapshot(step, r.algo.policy.state_dict(), env_state(r.env), payload)
        try:
            sent = self.evaluator.submit(snapshot)
        except EvaluatorFailed as exc:
            self._failed(exc)
            return False
        if not sent and self.evaluator.skipped == 1:
            log.warning("the evaluation of step %s still runs: the one at step %s is skipped "
                        "(evaluations take longer than eval.freq=%s env steps of training; "
                        "said once)", f"{self.evaluator.pending.step:,}", f"{step:,}",
                        f"{r.cfg.eval.freq:,}")
        return True

    def collect(self, wait: bool = False) -> None:
        """Take a finished evaluation (`wait`: the pending one, up to `START_TIMEOUT_S`, unless
        a stop is asked for meanwhile); a failed evaluator is said once."""
        if self.evaluator is None:
            return
        try:
            done = self.evaluator.poll()
            deadline = time.monotonic() + START_TIMEOUT_S
            while (wait and done is None and self.evaluator.pending is not None
                   and time.monotonic() < deadline and not self.runner.stopper.requested()):
                done = self.evaluator.poll(0.25)
        except EvaluatorFailed as exc:
            self._failed(exc)
            return
        if done is not None:
            snapshot, result = done
            self.runner.record_eval(result, snapshot.step, best=snapshot.payload)
            self.runner.save(self.runner.paths.latest)  # its best return goes with the state

    def declined(self) -> str | None:
        """Why this run evaluates in the training process although `eval.background=true`
        asks for the evaluator (None: it does not, or nothing was asked)."""
        r = self.runner
        if r.cfg.eval.background != "true" or r.cfg.eval.freq <= 0:
            return None
        if r.collective.world.size > 1:
            return "a torchrun job (the evaluator process serves single runs only)"
        if not self.allowed:
            return "a seed batch (the evaluator process serves single runs only, not one per seed)"
        if not self.rebuildable:
            return ("an algorithm built in Python (train(algo=...)): the evaluator process "
                    "rebuilds the algorithm from the config")
        return None

    def say_declined(self) -> None:
        """One line when `eval.background=true` is not followed, and why."""
        why = self.declined()
        if why is not None:
            log.warning("eval.background=true: periodic evaluations run in the training process "
                        "in %s", why)

    def _failed(self, exc: EvaluatorFailed) -> None:
        # an evaluator that ends while the run stops ends with it: no failure, and no "from now
        # on" (it ignores the stop signals, so this is a kill or a crash racing the stop)
        if not self.runner.stopper.requested():
            log.warning("background evaluation stopped (%s): evaluating in the training process "
                        "from now on", exc)
        self.close()

    def close(self) -> None:
        """End the evaluator (a pending evaluation is dropped)."""
        if self.evaluator is not None:
            self.evaluator.close()
            self.evaluator = None
