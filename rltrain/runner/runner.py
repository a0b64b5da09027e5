"""The Runner: builds everything from the config, runs the family's loop, evaluates, checkpoints."""

from __future__ import annotations

import logging
import random
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain import checkpoint
from rltrain.config import TrainConfig, config_to_dict
from rltrain.envs.make import env_state, load_env_state, make_env
from rltrain.evaluate import eval_metrics, run_episodes
from rltrain.loggers.base import build_loggers
from rltrain.loggers.console import ConsoleProgress
from rltrain.registry import check_action_space, get_algo_spec
from rltrain.runner.callbacks import Callback, Callbacks, LoopState
from rltrain.runner.episodes import EpisodeTracker

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
    """Owns one training run. Pass `algo=` to train an algorithm built in Python."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, algo: Any = None,
                 callbacks: dict[str, list[Callback]] | None = None):
        self.cfg = cfg
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
        self.episodes = EpisodeTracker()
        self.obs = self.env.reset(seed=cfg.seed)
        self._next_eval = cfg.eval.freq or None
        self._next_ckpt = cfg.checkpoint.freq or None
        self._next_log = 0

    def add_callback(self, event: str, fn: Callback) -> None:
        """Register `fn(state)` for one of `callbacks.EVENTS`."""
        self.callbacks.add(event, fn)

    def fire(self, event: str) -> None:
        """Run the callbacks of `event` with the current `LoopState`."""
        self.callbacks.fire(event, self.state)

    def run(self) -> dict[str, Any]:
        """Train, then evaluate and checkpoint the final policy; returns the final eval result."""
        from rltrain.runner.off_policy import run_off_policy
        from rltrain.runner.on_policy import run_on_policy

        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.loggers = build_loggers(self.cfg.logger, self.run_dir)
        self.progress = ConsoleProgress(self.state.total_timesteps, self.cfg.progress,
                                        self.cfg.logger.log_interval, start=self.state.global_step)
        self._t_start = time.perf_counter()
        log.info("training %s on %s for %s env steps (%d envs, device %s) -> %s",
                 self.cfg.algo.name, self.cfg.env.id, f"{self.state.total_timesteps:,}",
                 self.env.spec.num_envs, self.device, self.run_dir)
        try:
            loop = run_on_policy if self.family == "on_policy" else run_off_policy
            loop(self)
            self.progress.update(self.state.global_step, self.episodes.mean_return, force=True)
            last = self.state.last_eval
            done_at_this_step = last is not None and last.get("step") == self.state.global_step
            result = last if done_at_this_step else self.evaluate()
            self.save("latest.pt")
            self.save("final.pt")
        finally:
            self.progress.close()
            self.loggers.close()
            self.env.close()
            self.eval_env.close()
        log.info("done: eval mean reward %.2f ± %.2f over %d episodes; checkpoints in %s",
                 result["mean_reward"], result["std_reward"], result["episodes"],
                 self.run_dir / "checkpoints")
        return result

    def end_iteration(self) -> None:
        """Called by the loops after each update: log, evaluate and checkpoint when due."""
        state, step = self.state, self.state.global_step
        if step >= self._next_log:
            self._next_log = step + self.cfg.logger.log_freq
            metrics = dict(state.metrics)
            metrics.update(self.episodes.metrics())
            metrics["time/sps"] = self.progress.sps(step)
            self.loggers.log(metrics, step)
        self.progress.update(step, self.episodes.mean_return)
        if self._next_eval is not None and step >= self._next_eval:
            self._next_eval += self.cfg.eval.freq
            self.evaluate()
            self.save("latest.pt")
        if self._next_ckpt is not None and step >= self._next_ckpt:
            self._next_ckpt += self.cfg.checkpoint.freq
            self.save(f"step_{step:09d}.pt", periodic=True)
            self.save("latest.pt")
        self.fire("post_iteration")

    def evaluate(self) -> dict[str, Any]:
        """Deterministic episodes on the eval env; keeps `best.pt` up to date."""
        load_env_state(self.eval_env, env_state(self.env))
        cfg = self.cfg.eval
        result = run_episodes(self.algo.policy, self.eval_env, cfg.episodes, cfg.deterministic,
                              seed=self.cfg.seed + 10_000)
        result["step"] = self.state.global_step
        self.state.last_eval = result
        self.loggers.log(eval_metrics(result), self.state.global_step)
        if self.cfg.progress != "bar":
            log.info("eval at step %s: mean reward %.2f ± %.2f", f"{self.state.global_step:,}",
                     result["mean_reward"], result["std_reward"])
        if result["mean_reward"] > self.state.best_eval:
            self.state.best_eval = result["mean_reward"]
            self.save("best.pt")
        return result

    def save(self, name: str, periodic: bool = False) -> Path:
        """Write a checkpoint under `<run>/checkpoints/`; prune old periodic ones."""
        s = self.state
        payload = {
            "config": config_to_dict(self.cfg),
            "algo": self.algo.state_dict(),
            "env": env_state(self.env),
            "counters": {"global_step": s.global_step, "iteration": s.iteration,
                         "best_eval": s.best_eval},
            "rng": checkpoint.rng_state(),
            "metrics": {k: v for k, v in (s.last_eval or {}).items() if isinstance(v, float)},
        }
        path = checkpoint.save(payload, self.run_dir / "checkpoints" / name)
        if periodic:
            checkpoint.prune(self.run_dir / "checkpoints", self.cfg.checkpoint.keep_last)
        return path
