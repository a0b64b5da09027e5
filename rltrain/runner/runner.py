"""The Runner: builds everything from the config, runs the family's loop, evaluates, checkpoints."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rltrain.algos import compiled
from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.config.registry import check_action_space, get_algo_spec
from rltrain.config.schema import TrainConfig, config_to_dict
from rltrain.envs.atari import preprocessing
from rltrain.envs.atari_vec import preprocessing_line
from rltrain.envs.make import engine_note, env_state, load_env_state, make_env
from rltrain.envs.normalize import running_statistics
from rltrain.errors import EnvError
from rltrain.evaluation.episodes import EvalInterrupted, eval_metrics, run_episodes
from rltrain.loggers.base import build_loggers
from rltrain.loggers.config import LoggerConfig
from rltrain.loggers.console import ConsoleProgress
from rltrain.loggers.norm_stats import normalizer_metrics
from rltrain.parallel.world import SOLO, Solo
from rltrain.report.plot import write_run_curve
from rltrain.run_folder.lock import check_target, mark_started, run_lock
from rltrain.runner import setup
from rltrain.runner.background_eval import BackgroundEvals
from rltrain.runner.callbacks import Callback, LoopState
from rltrain.runner.guards import check_metrics, check_weights
from rltrain.runner.interrupt import GracefulStop, disk_full_is_one_line
from rltrain.runner.messages import (
    kept,
    say_done,
    say_encoders,
    say_eval,
    say_setup,
    say_start,
    say_stopped,
)
from rltrain.runner.off_policy import run_off_policy
from rltrain.runner.on_policy import run_on_policy
from rltrain.runner.one_run import OneRun
from rltrain.runner.restore import make_payload, rank_part, restore, say_resumed, with_ranks
from rltrain.runner.schedule import Schedule
from rltrain.threads import torch_threads
from rltrain.types import Metrics

log = logging.getLogger("rltrain")

CONSTRUCTOR_FLAGS = ("setup_lines", "stop_line", "resume_target")
"""What a Runner is configured with, set once by `Runner(...)` (`setup.set_once` refuses a second)."""
NO_EVAL = {"mean_reward": float("nan"), "std_reward": float("nan"), "episodes": 0}
"""The result of a run that has no evaluation (a stop before the first; ranks other than 0)."""


class Runner:
    """Owns one training run. Pass `algo=` to train an algorithm built in Python, and
    `resume_from=` (a loaded checkpoint payload) to continue a run where it stopped.

    A seed of a batch is configured here too, never by flags set afterwards (`setup.set_once`):
    `rows=` (its view of the batch's engine); `resume_line`, `setup_lines`, `stop_line` False
    leave those lines to the batch; `resume_target=` the folder a resume names (the batch's);
    `background_eval=False` evaluates in the training process (no evaluator per seed).

    Under torchrun (`collective`, see `rltrain/parallel/world.py`) every rank builds a Runner for
    the same run folder; rank 0 alone writes it, logs, evaluates and checkpoints."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, algo: Any = None,
                 callbacks: dict[str, list[Callback]] | None = None,
                 resume_from: dict[str, Any] | None = None, collective: Solo = SOLO, *,
                 rows: Any = None, resume_line: bool = True, setup_lines: bool = True,
                 stop_line: bool = True, resume_target: str | Path | None = None,
                 background_eval: bool = True):
        # built with the threads it trains with (one by default: initial weights alike on every
        # machine, orthogonal init's QR included), given back after, as after the run
        with torch_threads(cfg.torch_threads):
            self._build(cfg, run_dir, algo, callbacks, resume_from, collective, rows,
                        background_eval)
        # a seed of a batch (`setup_lines` False): the batch says it once, for its stacked form
        setup.compile_update(cfg, self.algo, self.device, quiet=not setup_lines)
        self.setup_lines, self.stop_line = setup_lines, stop_line
        """Whether the start lines include `say_setup()`'s; whether a stop says how to resume."""
        self.resume_target = self.run_dir if resume_target is None else Path(resume_target)
        """The folder a resume of this run names (a seed of a batch: the batch's)."""
        if self.restored is not None and resume_line:  # a seed batch says it once for all
            say_resumed(cfg.env.id, {cfg.seed: self.restored})

    def __setattr__(self, name: str, value: Any) -> None:
        """Any attribute, but the constructor's flags (`CONSTRUCTOR_FLAGS`) only once."""
        setup.set_once(self, name, value, CONSTRUCTOR_FLAGS)

    def _build(self, cfg: TrainConfig, run_dir: str | Path | None, algo: Any,
               callbacks: dict[str, list[Callback]] | None, resume_from: dict[str, Any] | None,
               collective: Solo, rows: Any, background_eval: bool) -> None:
        self.cfg = cfg
        # the plain dict checkpoints store; built once (it took ~12 ms, half of each save)
        self.config_dict = config_to_dict(cfg)
        # absolute: a caller that changes its working folder mid-run (a callback, another
        # thread) must not split the run's files between two folders
        self.run_dir = (Path(run_dir) if run_dir is not None else setup.default_run_dir()).absolute()
        self.paths = RunDir(self.run_dir)
        self.device = setup.resolve_device(cfg.device)
        setup.seed_everything(cfg.seed)
        spec = get_algo_spec(cfg.algo.name)
        self.family = spec.family
        self.collective, world = collective, collective.world
        self.main = world.is_main
        setup.check_data_parallel(cfg.algo.name, self.family, world.size)
        self.env = make_env(cfg.env, self.device, gamma=cfg.algo.gamma, base=rows)
        if world.size > 1:  # from here on every rank's normalizer additions are merged
            for rms in running_statistics(self.env):
                rms.share()
        check_action_space(cfg.algo.name, self.env.spec.action_kind, cfg.env.id)
        self.algo = algo if algo is not None else spec.build(cfg.algo, self.env.spec, self.device)
        if world.size > 1:  # rank 0's initial weights everywhere; own sampling per rank
            self.algo.collective = collective
            collective.broadcast_(list(self.algo.policy.parameters()))
            setup.seed_everything(cfg.seed + world.rank)
        self.eval_env = (make_env(cfg.env, self.device, training=False,
                                  num_envs=min(cfg.eval.num_envs, cfg.eval.episodes))
                         if self.main else None)
        self.callbacks = setup.build_callbacks(callbacks)
        self.ctx = c = setup.build_context(cfg, self.family == "off_policy", self.env, self.algo,
                                           self.device, self.fire, self.end_iteration, collective)
        self.state, self.episodes, self.timer, self.replay = c.state, c.episodes, c.timer, c.replay
        setup.check_env_state(self.env, cfg.env.id)
        self.schedule = Schedule.every(cfg.eval.freq, cfg.checkpoint.freq, cfg.logger.log_freq)
        self.stopper = GracefulStop(self.state, self.run_dir, deferred=world.size > 1)
        self.resumed = resume_from is not None
        self.background_evals = BackgroundEvals(self, rebuildable=algo is None, allowed=background_eval)
        """Periodic evaluations in a second process (`eval.background`, `runner/background_eval.py`)."""
        self.started = False
        """True once this Runner took its folder (after the check that it may write there)."""
        self.restored = (None if resume_from is None else
                         restore(self.ctx, self.schedule, resume_from, self.cfg, self.run_dir))
        """Where a resumed run continued (`resume_from`), and why its episodes restart."""

    def add_callback(self, event: str, fn: Callback) -> None:
        """Register `fn(state)` for one of `callbacks.EVENTS`."""
        self.callbacks.add(event, fn)

    def fire(self, event: str) -> None:
        """Run the callbacks of `event` with the current `LoopState`."""
        self.callbacks.fire(event, self.state)

    def run(self) -> dict[str, Any]:
        """Train, then evaluate and checkpoint the final policy; returns the final eval result.
        A fault is one `TrainingError` line and the last good checkpoint stays in place."""
        with self.opened():
            started = time.perf_counter()
            result = self._train_and_finish()
            self.log_final(result, started)
        self.say_done(result)
        return result

    def run_to(self, step: int) -> None:
        """Train up to `step` and write `latest.pt` there, without the final evaluation: a seed
        catching up with its batch (`seed_batch/resume.py`). A stop on the way saves where it is."""
        def reached(state: LoopState) -> None:
            if state.global_step >= step and not state.stop:
                state.stop, state.stop_reason = True, "caught up"

        self.add_callback("post_iteration", reached)
        with self.opened():
            self._train_and_finish()

    @contextlib.contextmanager
    def opened(self) -> Iterator[None]:
        """The run's folder locked, the stop handlers (signals, `STOP`) on and the outputs open,
        from the first step to the last file written; everything closed however it ends."""
        if self.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = run_lock(self.run_dir) if self.main else contextlib.nullcontext()
        with lock, self.stopper, disk_full_is_one_line(self.resume_target, self.cfg.env), \
                torch_threads(self.cfg.torch_threads, self.cfg.flush_denormal):
            self._open_outputs()
            self.background_evals.start()
            try:
                yield
            finally:
                self.background_evals.close()
                if self.main:
                    self.stopper.stop_file.unlink(missing_ok=True)  # a STOP file is consumed
                self.progress.close()
                self.loggers.close()
                self.env.close()
                if self.eval_env is not None:
                    self.eval_env.close()
                if self.main:
                    write_run_curve(self.run_dir)  # learning_curve.png; never raises

    def log_final(self, result: dict[str, Any], started: float) -> None:
        """A completed run's `final/*` row (`started`: its `time.perf_counter()` at the start)."""
        if "stopped" not in result:
            self.loggers.log(final_metrics(result, self.state, time.perf_counter() - started),
                             self.state.global_step)

    def say_done(self, result: dict[str, Any]) -> None:
        """The closing line of a completed run."""
        if "stopped" not in result and self.main:
            say_done(result, self.state.global_step, self.paths.checkpoints)

    def _open_outputs(self) -> None:
        """Loggers, console progress and the start lines: rank 0's (the only one under
        torchrun that writes the folder); other ranks get none and say nothing."""
        cfg = self.cfg
        if not self.main:
            self.loggers = build_loggers(LoggerConfig(csv=False), self.run_dir)
            self.progress = ConsoleProgress(self.state.total_timesteps, "off", 1e9)
            return
        # a resume only when a checkpoint was loaded: `cfg.resume` alone (a Runner built in
        # Python) must not open a finished run's folder to a run that starts from scratch
        # (`auto` without a loaded checkpoint: a fresh start, never over a run's checkpoints)
        auto = cfg.resume == "auto" and not RunDir(self.run_dir).has_checkpoint()
        resume = (cfg.resume or "checkpoint") if self.resumed else "auto" if auto else None
        check_target(self.run_dir, resume, self.state.total_timesteps)
        mark_started(self.run_dir)  # the folder is this run's: its files are never cleared
        self.started = True
        self.stopper.clear_stale_stop_file()
        self.loggers = build_loggers(cfg.logger, self.run_dir, purge_step=self.state.global_step,
                                     config=self.config_dict)
        envs = self.env.spec.num_envs * self.collective.world.size
        self.progress = ConsoleProgress(
            self.state.total_timesteps, cfg.progress, cfg.logger.log_interval,
            start=self.state.global_step, num_envs=envs, timer=self.timer,
            best=self.state.best_eval)
        say_start(cfg, self.state.total_timesteps, envs, self.device, self.run_dir,
                  self.collective.world.size)
        if self.setup_lines:
            self.say_setup()

    def say_setup(self) -> None:
        """The lines on how the run is set up: preset or defaults, recurrent core, Atari
        preprocessing, observation encoders."""
        envs = self.env.spec.num_envs * self.collective.world.size
        say_setup(self.cfg, envs, resumed=self.resumed)
        if preprocessing(self.cfg.env):
            log.info(preprocessing_line(self.env, self.cfg.env))
        if engine_note(self.env):
            log.info(engine_note(self.env))
        say_encoders(self.cfg.algo, self.env.spec)
        self.background_evals.say_declined()  # an explicit eval.background=true not followed

    def _train_and_finish(self) -> dict[str, Any]:
        """The family's loop, then `finish()`."""
        try:
            try:
                (run_on_policy if self.family == "on_policy" else run_off_policy)(OneRun(self.ctx))
            except ValueError:  # e.g. torch distributions refusing NaN parameters
                check_weights(self.algo, self.state.global_step)
                raise
        except EnvError as exc:
            raise self._env_error(exc) from exc
        return self.finish()

    def finish(self) -> dict[str, Any]:
        """After the loop: the final evaluation and checkpoints, or `latest.pt` after a stop."""
        try:
            self.progress.update(self.state.global_step, self.episodes.mean_return, force=True)
            if self.state.stop:
                return self._stopped()
            self.background_evals.collect(wait=True)  # its result may be this step's, or the best
            self.background_evals.close()
            last = self.state.last_eval
            result = (last if last and last.get("step") == self.state.global_step
                      else self.evaluate() if self.main else dict(NO_EVAL))
        except EvalInterrupted:  # a stop arrived during an evaluation: it is abandoned
            return self._stopped()
        except EnvError as exc:
            raise self._env_error(exc) from exc
        self.save(self.paths.latest)
        self.save(self.paths.final)
        if self.state.stop:  # the stop came during the final save: the run is complete anyway
            log.warning("%s received while writing the final checkpoints; the run is complete",
                        self.state.stop_reason)
            self.stopper.signum = None
        return result

    def _env_error(self, exc: EnvError) -> EnvError:
        """`exc` with the env step it happened at and where the last good checkpoint is."""
        return EnvError(f"{exc} (at env step {self.state.global_step:,}); "
                        f"{kept(self.resume_target, self.cfg.env)}")

    def _stopped(self) -> dict[str, Any]:
        """Save `latest.pt` after a requested stop and tell the user how to continue."""
        self.save(self.paths.latest)
        if self.stop_line:
            say_stopped(self.state.stop_reason or "callback", self.state.global_step,
                        self.run_dir, self.cfg.env, self.collective.world.size)
        last = dict(self.state.last_eval or NO_EVAL)
        last["stopped"] = self.state.stop_reason or "callback"
        return last

    def end_iteration(self) -> None:
        """The loops' hook after each update: check, log, evaluate and checkpoint when due."""
        step = self.state.global_step
        check_metrics(self.state.metrics, step)  # torchrun: metrics are the ranks' means
        if self.schedule.due_log(step) and self.main:
            with self.timer("log"):
                self.loggers.log(self._train_metrics(step), step)
        self.progress.status.exclude(compiled.take_compile_seconds(self.algo))
        self.progress.update(step, self.episodes.mean_return)
        self.background_evals.collect()
        if self.schedule.due_eval(step):
            # handed to the evaluator (or skipped while it is busy), else evaluated here
            if not self.background_evals.submit(step) and self.main and not self.evaluate_unless_stopped():
                return  # the loop ends at this step; `finish()` saves `latest.pt` once
            self.save(self.paths.latest)
        if self.schedule.due_ckpt(step):
            self.save(self.paths.periodic(step), periodic=True)
            self.save(self.paths.latest)
        if self.main:
            self.stopper.check_stop_file()
        self.fire("post_iteration")
        # torchrun: every rank stops at this step if any asked to (a signal, STOP, a callback)
        asked_here = self.state.stop  # a callback (signals and STOP files name themselves)
        self.state.stop = self.collective.any_(self.state.stop or self.stopper.pending)
        if self.state.stop and not self.state.stop_reason:
            self.state.stop_reason = "callback" if asked_here else "a stop on another rank"

    def _train_metrics(self, step: int) -> Metrics:
        """What a log row holds: the update's metrics, episodes, normalizer, timings and speed."""
        metrics = dict(self.state.metrics)
        metrics.update(self.episodes.metrics())
        if self.cfg.logger.log_norm_stats:
            metrics.update(normalizer_metrics(self.env))
        metrics.update(self.timer.metrics())
        metrics["time/sps"] = self.progress.sps(step)
        return metrics

    def evaluate_unless_stopped(self) -> bool:
        """A periodic evaluation; False when a stop (signal, `STOP` file) abandoned it midway:
        the run then stops at this step as after any iteration (its result is dropped, the
        next resume evaluates again when due)."""
        try:
            self.evaluate()
        except EvalInterrupted:
            self.state.stop = True
            return False
        return True

    def evaluate(self) -> dict[str, Any]:
        """Deterministic episodes on the eval env; keeps `best.pt` up to date."""
        load_env_state(self.eval_env, env_state(self.env))
        cfg = self.cfg.eval
        # torchrun: an evaluation is never cut short (the other ranks wait for its checkpoint)
        stop = self.stopper.requested if self.collective.world.size == 1 else None
        with self.timer("eval"):
            result = run_episodes(self.algo.policy, self.eval_env, cfg.episodes, cfg.deterministic,
                                  seed=self.cfg.seed + cfg.seed_offset, stop=stop)
        return self.record_eval(result, self.state.global_step)

    def record_eval(self, result: dict[str, Any], step: int,
                     best: dict[str, Any] | None = None) -> dict[str, Any]:
        """Log, say and keep the evaluation of the policy at `step`; `best.pt` when it is the
        best so far (`best`: that policy's payload, when it is no longer the live one)."""
        result["step"] = step
        self.state.last_eval = result
        self.loggers.log(eval_metrics(result), step)
        finite = say_eval(result, step)
        if finite and result["mean_reward"] > self.state.best_eval:  # a NaN is never "best"
            self.state.best_eval = result["mean_reward"]
            if best is None:
                self.save(self.paths.best, gather=False)  # rank 0 alone evaluates
            else:
                with self.timer("checkpoint"):
                    checkpoint.save(best, self.paths.best)
        self.progress.eval_done(result["mean_reward"], result["std_reward"], step,
                                self.state.best_eval)
        return result

    def save(self, path: Path, periodic: bool = False, gather: bool = True) -> Path:
        """Write a checkpoint to `path` (one of `self.paths`); never one with non-finite weights.
        Under torchrun every rank calls it (`gather`: their own parts go in), rank 0 writes."""
        with self.timer("checkpoint"):
            check_weights(self.algo, self.state.global_step)
            payload = make_payload(self.ctx, self.schedule, self.config_dict,
                                   self.cfg.checkpoint.save_buffer)
            if self.collective.world.size > 1:  # every rank's own envs, loop and generators
                parts = self.collective.gather(rank_part(payload)) if gather else None
                if not self.main:
                    return path
                payload = with_ranks(payload, parts, self.collective.world.size)
            path = checkpoint.save(payload, path)
            if periodic:
                checkpoint.prune(self.paths.checkpoints, self.cfg.checkpoint.keep_last)
        return path


def final_metrics(result: dict[str, Any], state: LoopState, seconds: float) -> Metrics:
    """What a completed run logs once at its last step (`final/*`; TensorBoard's HParams
    entry takes them as its metrics): final and best eval means, env steps, wall-clock seconds
    of this process (a resumed run counts from its resume)."""
    out = {"final/eval_mean": float(result["mean_reward"]), "final/best_eval": state.best_eval,
           "final/env_steps": float(state.global_step), "final/wall_clock_s": seconds}
    if "success_rate" in result:  # a goal env's
        out["final/success_rate"] = float(result["success_rate"])
    return out
