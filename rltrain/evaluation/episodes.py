"""Episodes of a policy: exactly N evaluation episodes spread evenly over a vector env's rows
(`run_episodes`), and the `eval/*` metrics of their result. The runner evaluates with these during
training; `evaluation/command.py` evaluates a saved checkpoint with them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rltrain import obs as obs_ops
from rltrain.envs.masks import action_mask
from rltrain.envs.vec_env import VecEnv
from rltrain.nets.mode import eval_mode
from rltrain.text import duration

log = logging.getLogger("rltrain")


class EvalInterrupted(Exception):
    """A stop (signal, `STOP` file) was requested during an evaluation; its result is dropped."""


MAX_EVAL_EPISODE_STEPS = 100_000
"""An evaluation episode still running after this many steps (an env without a time limit, a
policy that never reaches an end) is cut there and counted as it stands, with a warning."""
HEARTBEAT_S = 30.0
"""An evaluation running longer than this says how far it got, again every this many seconds
(an Atari game that is never started with FIRE runs 27,000 steps an episode: minutes, silent)."""


@torch.no_grad()
def run_episodes(policy: Any, env: VecEnv, episodes: int, deterministic: bool = True,
                 seed: int | None = None, stop: Callable[[], bool] | None = None,
                 max_episode_steps: int = MAX_EVAL_EPISODE_STEPS) -> dict[str, Any]:
    """Run exactly `episodes` episodes, spread evenly over the env's rows.

    Each row runs a fixed number of episodes, so short episodes are not over-represented (taking
    the first N to finish would bias the mean towards them). Returns are raw env rewards.
    `stop()` is asked before every step; when it says yes, `EvalInterrupted` is raised. A row
    whose episode reaches `max_episode_steps` without ending gives that partial episode as its
    last one (the vector env cannot reset one row), so an evaluation always ends. The policy
    runs in eval mode (BatchNorm's running statistics, no Dropout) and is handed back in its own.
    A goal env that reports `info["is_success"]` adds `success_rate`: the share of the counted
    episodes whose last step succeeded (over those that reported one).
    """
    with eval_mode(policy):
        return _run_episodes(policy, env, episodes, deterministic, seed, stop, max_episode_steps)


def _run_episodes(policy: Any, env: VecEnv, episodes: int, deterministic: bool,
                  seed: int | None, stop: Callable[[], bool] | None,
                  max_episode_steps: int) -> dict[str, Any]:
    """`run_episodes`, with the policy already in eval mode."""
    n = env.spec.num_envs
    targets = np.array(episode_targets(episodes, n))
    counts = np.zeros(n, dtype=np.int64)
    returns: list[float] = []
    lengths: list[int] = []
    successes: list[float] = []  # a goal env's `is_success` per counted episode (NaN: none)
    running, steps = np.zeros(n), np.zeros(n, dtype=np.int64)  # each row's current episode
    obs = env.reset(seed)
    act = PolicyStepper(policy, n, obs_ops.device(obs))
    heartbeat = Heartbeat(episodes)
    while (counts < targets).any():
        if stop is not None and stop():
            raise EvalInterrupted
        heartbeat.tick(len(returns), n)
        res = env.step(act(obs, deterministic, action_mask(env)))
        ended = res.terminated | res.truncated
        act.episode_ends(ended)
        done = ended.cpu().numpy()
        running += res.reward.cpu().numpy()
        steps += 1
        ep = res.info.get("episode")
        reported: set[int] = set()
        if ep is not None:
            success = ep.get("success", np.full(len(ep["index"]), np.nan))
            for i, ret, length, won in zip(ep["index"], ep["return"], ep["length"], success,
                                           strict=True):
                reported.add(int(i))
                if counts[i] < targets[i]:
                    counts[i] += 1
                    returns.append(float(ret))
                    lengths.append(int(length))
                    successes.append(float(won))
        for i in np.flatnonzero(done):  # a native env that gives no info["episode"]: own sums
            if int(i) not in reported and counts[i] < targets[i]:
                counts[i] += 1
                returns.append(float(running[i]))
                lengths.append(int(steps[i]))
        running[done], steps[done] = 0.0, 0
        for i in np.flatnonzero((steps >= max_episode_steps) & (counts < targets)):
            log.warning("evaluation: an episode ran %s steps without ending (the env has no "
                        "time limit?); counted as it stands, and this env row stops there. Set "
                        "env.max_episode_steps to end episodes", f"{max_episode_steps:,}")
            returns.append(float(running[i]))
            lengths.append(int(steps[i]))
            counts[i] = targets[i]
        obs = res.obs
    r = np.asarray(returns)
    result = {"episodes": len(returns), "mean_reward": float(r.mean()),
              "std_reward": float(r.std()), "min_reward": float(r.min()),
              "max_reward": float(r.max()), "mean_length": float(np.mean(lengths)),
              "returns": returns, "lengths": lengths}
    won = [v for v in successes if v == v]  # not NaN: the episodes whose env reported one
    if won:
        result["success_rate"] = float(np.mean(won))
    return result


class Heartbeat:
    """Says how far an evaluation got, once it runs longer than `HEARTBEAT_S`, and again every
    `HEARTBEAT_S` seconds after."""

    def __init__(self, episodes: int):
        self.episodes, self.steps = episodes, 0
        self.started = time.monotonic()
        self.next = self.started + HEARTBEAT_S

    def tick(self, done: int, steps: int) -> None:
        """Before a vector step of `steps` env steps, with `done` episodes counted so far."""
        now = time.monotonic()
        if now >= self.next:
            log.info("evaluation: %d of %d episodes done, %s env steps so far (%s)", done,
                     self.episodes, f"{self.steps:,}", duration(now - self.started))
            self.next = now + HEARTBEAT_S
        self.steps += steps


class PolicyStepper:
    """Calls `policy.act` each step, with the env's action mask when it has one; a recurrent
    policy (`policy.recurrent`) carries its state, zeroed where an episode ended."""

    def __init__(self, policy: Any, n: int, device: torch.device):
        self.policy = policy
        self.recurrent = getattr(policy, "recurrent", False)
        if self.recurrent:
            self.state = policy.initial_state(n, device)
            self.starts = torch.ones(n, dtype=torch.bool, device=device)

    def __call__(self, obs: torch.Tensor, deterministic: bool,
                 mask: torch.Tensor | None) -> torch.Tensor:
        if self.recurrent:
            action, self.state = self.policy.act_step(obs, self.state, self.starts,
                                                      deterministic, mask)
            return action
        if mask is None:
            return self.policy.act(obs, deterministic=deterministic)
        return self.policy.act(obs, deterministic=deterministic, action_mask=mask)

    def episode_ends(self, done: torch.Tensor) -> None:
        """The rows whose next observation begins a new episode."""
        if self.recurrent:
            self.starts = done


def episode_targets(episodes: int, num_envs: int) -> list[int]:
    """Episodes each env row runs so that `episodes` are spread evenly (they sum to `episodes`)."""
    return [(episodes + i) // num_envs for i in range(num_envs)]


def eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The `eval/*` scalars of a `run_episodes` result."""
    keys = ("mean_reward", "std_reward", "min_reward", "max_reward", "mean_length",
            "success_rate")
    return {f"eval/{k}": result[k] for k in keys if k in result}
