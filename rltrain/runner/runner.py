"""The Runner: builds everything from the config, runs the family's loop, evaluates, checkpoints."""

from __future__ import annotations

import logging
import math
import random
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain import checkpoint
from rltrain.config import TrainConfig, config_to_dict
from rltrain.envs.extras import set_log_keys
from rltrain.envs.make import env_state, load_env_state, make_env
from rltrain.errors import EnvError
from rltrain.evaluate import EvalInterrupted, eval_metrics, run_episodes
from rltrain.loggers.base import build_loggers
from rltrain.loggers.console import ConsoleProgress
from rltrain.loggers.norm_stats import normalizer_metrics
from rltrain.registry import check_action_space, get_algo_spec
from rltrain.report.plot import write_run_curve
from rltrain.runner.callbacks import Callback, Callbacks, LoopState
from rltrain.runner.episodes import EpisodeTracker
from rltrain.runner.guards import check_metrics, check_parameters
from rltrain.runner.interrupt import GracefulStop, disk_full_is_one_line
from rltrain.runner.off_policy import run_off_policy
from rltrain.runner.on_policy import run_on_policy
from rltrain.runner.ownership import check_target, run_lock
from rltrain.runner.resume import make_payload, restore
from rltrain.runner.timing import SectionTimer

log = logging.getLogger("rltrain")


def resolve_device(name: str) -> torch.device:
    """`auto` picks cuda when available; anything else is passed to torch."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def default_run_dir() -> Path:
    """`outputs/<YYYY-MM-DD>/<HH-MM-SS>` in the current folder (the Hydra layout)."""
    now = datetime.now()
    return Path("outputs") / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S")


class Runner:
    """Owns one training run. Pass `algo=` to train an algorithm built in Python, and
    `resume_from=` (a loaded checkpoint payload) to continue a run where it stopped."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, algo: Any = None,
                 callbacks: dict[str, list[Callback]] | None = None,
                 resume_from: dict[str, Any] | None = None):
        self.cfg = cfg
        # the plain dict checkpoints store; built once (it took ~12 ms, half of each save)
        self.config_dict = config_to_dict(cfg)
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir()
        self.device = resolve_device(cfg.device)
        if cfg.torch_threads > 0:
            torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        spec = get_algo_spec(cfg.algo.name)
        self.family = spec.family
        self.env = make_env(cfg.env, self.device, gamma=cfg.algo.gamma)
        check_action_space(cfg.algo.name, self.env.spec.action_kind, cfg.env.id)
        self.algo = algo if algo is not None else spec.build(cfg.algo, self.env.spec, self.device)
        self.eval_env = make_env(cfg.env, self.device, num_envs=min(cfg.eval.num_envs, cfg.eval.episodes),
                                 training=False)
        self.callbacks = Callbacks()
        for event, fns in (callbacks or {}).items():
            for fn in fns:
                self.callbacks.add(event, fn)
        self.state = LoopState(total_timesteps=int(cfg.total_timesteps))
        self.episodes = EpisodeTracker(extra_keys=cfg.logger.extra_log_keys)
        set_log_keys(self.env, cfg.logger.extra_log_keys)
        self.obs = self.env.reset(seed=cfg.seed)
        # next env step at which to evaluate / checkpoint / log (0 = never for eval and ckpt)
        self.schedule = {"eval": cfg.eval.freq, "ckpt": cfg.checkpoint.freq, "log": 0}
        self.stopper = GracefulStop(self.state, self.run_dir)
        self.timer = SectionTimer()
        self.resumed = resume_from is not None
        if resume_from is not None:
            restore(self, resume_from)

    def add_callback(self, event: str, fn: Callback) -> None:
        """Register `fn(state)` for one of `callbacks.EVENTS`."""
        self.callbacks.add(event, fn)

    def fire(self, event: str) -> None:
        """Run the callbacks of `event` with the current `LoopState`."""
        self.callbacks.fire(event, self.state)

    def run(self) -> dict[str, Any]:
        """Train, then evaluate and checkpoint the final policy; returns the final eval result.

        The run folder's lock and the stop handlers (signals, `STOP`) cover the whole run, from
        the first step to the last file written; a fault is one `TrainingError` line and the
        last good checkpoint stays in place.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with run_lock(self.run_dir), self.stopper, disk_full_is_one_line(self.run_dir):
            resume = self.cfg.resume or ("checkpoint" if self.resumed else None)
            check_target(self.run_dir, resume, self.state.total_timesteps)
            self.stopper.clear_stale_stop_file()
            self.loggers = build_loggers(self.cfg.logger, self.run_dir,
                                         purge_step=self.state.global_step, config=self.config_dict)
            self.progress = ConsoleProgress(self.state.total_timesteps, self.cfg.progress,
                                            self.cfg.logger.log_interval, start=self.state.global_step)
            log.info("training %s on %s for %s env steps (%d envs, device %s) -> %s",
                     self.cfg.algo.name, self.cfg.env.id, f"{self.state.total_timesteps:,}",
                     self.env.spec.num_envs, self.device, self.run_dir)
            try:
                result = self._train_and_finish()
            finally:
                self.stopper.stop_file.unlink(missing_ok=True)  # a STOP file is always consumed
                self.progress.close()
                self.loggers.close()
                self.env.close()
                self.eval_env.close()
                write_run_curve(self.run_dir)  # learning_curve.png; never raises
        if "stopped" not in result:
            log.info("done: %s env steps; eval mean reward %.2f ± %.2f over %d episodes; "
                     "checkpoints in %s", f"{self.state.global_step:,}", result["mean_reward"],
                     result["std_reward"], result["episodes"], self.run_dir / "checkpoints")
        return result

    def _train_and_finish(self) -> dict[str, Any]:
        """The family's loop, the final evaluation and the final checkpoints (or a stop)."""
        try:
            try:
                (run_on_policy if self.family == "on_policy" else run_off_policy)(self)
            except ValueError:  # e.g. torch distributions refusing NaN parameters
                self._check_weights()
                raise
            self.progress.update(self.state.global_step, self.episodes.mean_return, force=True)
            if self.state.stop:
                return self._stopped()
            last = self.state.last_eval
            result = last if last and last.get("step") == self.state.global_step else self.evaluate()
        except EvalInterrupted:  # a stop arrived during an evaluation: it is abandoned
            return self._stopped()
        except EnvError as exc:
            raise EnvError(f"{exc} (at env step {self.state.global_step:,}); "
                           f"{self._kept()}") from exc
        self.save("latest.pt")
        self.save("final.pt")
        if self.state.stop:  # the stop came during the final save: the run is complete anyway
            log.warning("%s received while writing the final checkpoints; the run is complete",
                        self.state.stop_reason)
            self.stopper.signum = None
        return result

    def _kept(self) -> str:
        latest = self.run_dir / "checkpoints" / "latest.pt"
        return (f"the last good checkpoint is kept: resume with rltrain resume={self.run_dir}"
                if latest.is_file() else "no checkpoint was written yet")

    def _stopped(self) -> dict[str, Any]:
        """Save `latest.pt` after a requested stop and tell the user how to continue."""
        self.save("latest.pt")
        log.warning("stopped (%s) at step %s; checkpoint saved. Resume with: rltrain resume=%s",
                    self.state.stop_reason or "callback", f"{self.state.global_step:,}", self.run_dir)
        last = dict(self.state.last_eval or {"mean_reward": float("nan"), "std_reward": float("nan"),
                                             "episodes": 0})
        last["stopped"] = self.state.stop_reason or "callback"
        return last

    def end_iteration(self) -> None:
        """Called by the loops after each update: check, log, evaluate and checkpoint when due."""
        state, step, sched = self.state, self.state.global_step, self.schedule
        check_metrics(state.metrics, step)
        if step >= sched["log"]:
            with self.timer("log"):
                sched["log"] = step + self.cfg.logger.log_freq
                metrics = dict(state.metrics)
                metrics.update(self.episodes.metrics())
                if self.cfg.logger.log_norm_stats:
                    metrics.update(normalizer_metrics(self.env))
                metrics.update(self.timer.metrics())
                metrics["time/sps"] = self.progress.sps(step)
                self.loggers.log(metrics, step)
        self.progress.update(step, self.episodes.mean_return)
        if sched["eval"] and step >= sched["eval"]:
            sched["eval"] += self.cfg.eval.freq
            self.evaluate()
            self.save("latest.pt")
        if sched["ckpt"] and step >= sched["ckpt"]:
            sched["ckpt"] += self.cfg.checkpoint.freq
            self.save(f"step_{step:09d}.pt", periodic=True)
            self.save("latest.pt")
        self.stopper.check_stop_file()
        self.fire("post_iteration")

    def evaluate(self) -> dict[str, Any]:
        """Deterministic episodes on the eval env; keeps `best.pt` up to date."""
        load_env_state(self.eval_env, env_state(self.env))
        cfg = self.cfg.eval
        with self.timer("eval"):
            result = run_episodes(self.algo.policy, self.eval_env, cfg.episodes, cfg.deterministic,
                                  seed=self.cfg.seed + 10_000, stop=self.stopper.requested)
        result["step"] = self.state.global_step
        self.state.last_eval = result
        self.loggers.log(eval_metrics(result), self.state.global_step)
        if self.cfg.progress != "bar":
            log.info("eval at step %s: mean reward %.2f ± %.2f", f"{self.state.global_step:,}",
                     result["mean_reward"], result["std_reward"])
        if not math.isfinite(result["mean_reward"]):  # never "best"; say where it came from
            log.warning("eval at step %s: mean reward is %s (the env returned non-finite "
                        "rewards); best.pt is not updated", f"{self.state.global_step:,}",
                        result["mean_reward"])
        elif result["mean_reward"] > self.state.best_eval:
            self.state.best_eval = result["mean_reward"]
            self.save("best.pt")
        return result

    def _check_weights(self) -> None:
        """Raise `TrainingError` when any network of the algorithm holds a NaN or inf."""
        modules = {k: v for k, v in vars(self.algo).items() if isinstance(v, torch.nn.Module)}
        check_parameters(modules, self.state.global_step)

    def save(self, name: str, periodic: bool = False) -> Path:
        """Write a checkpoint under `<run>/checkpoints/` (never one with non-finite weights)."""
        with self.timer("checkpoint"):
            self._check_weights()
            path = checkpoint.save(make_payload(self), self.run_dir / "checkpoints" / name)
            if periodic:
                checkpoint.prune(self.run_dir / "checkpoints", self.cfg.checkpoint.keep_last)
        return path
