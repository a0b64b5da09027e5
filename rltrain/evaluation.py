"""Evaluation: deterministic episodes of a policy, and `rltrain eval` on a saved checkpoint
(optionally recording MP4s of the evaluated episodes, see `rltrain/video.py`)."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain import obs as obs_ops
from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.run_dir import RunDir
from rltrain.envs.masks import action_mask
from rltrain.envs.trust import NamedCode, require_named
from rltrain.envs.vec_env import VecEnv
from rltrain.errors import UserError
from rltrain.guest import as_guest
from rltrain.text import duration
from rltrain.threads import torch_threads

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
    last one (the vector env cannot reset one row), so an evaluation always ends.
    """
    n = env.spec.num_envs
    targets = np.array(episode_targets(episodes, n))
    counts = np.zeros(n, dtype=np.int64)
    returns: list[float] = []
    lengths: list[int] = []
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
            for i, ret, length in zip(ep["index"], ep["return"], ep["length"], strict=True):
                reported.add(int(i))
                if counts[i] < targets[i]:
                    counts[i] += 1
                    returns.append(float(ret))
                    lengths.append(int(length))
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
    return {"episodes": len(returns), "mean_reward": float(r.mean()), "std_reward": float(r.std()),
            "min_reward": float(r.min()), "max_reward": float(r.max()),
            "mean_length": float(np.mean(lengths)), "returns": returns, "lengths": lengths}


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
    keys = ("mean_reward", "std_reward", "min_reward", "max_reward", "mean_length")
    return {f"eval/{k}": result[k] for k in keys}


def _mode(policy: Any, algo: str, deterministic: bool) -> tuple[bool, str | None]:
    """(whether the evaluation is deterministic, a note when `deterministic=False` asked for a
    stochastic mode the policy lacks: DQN's, TD3's and DDPG's act greedily)."""
    if deterministic or getattr(policy, "stochastic", True):
        return deterministic, None
    return True, (f"{algo}'s policy is deterministic (its exploration is a training device): "
                  f"deterministic=false evaluates the same actions")


@as_guest
def evaluate(ckpt: str | Path, episodes: int = 10, deterministic: bool = True, seed: int = 1000,
             device: str = "cpu", num_envs: int = 5, write: bool = True, video: bool = False,
             video_episodes: int | None = 3, named: NamedCode | None = None) -> dict[str, Any]:
    """Rebuild the agent from a checkpoint alone and evaluate it; writes `eval/results.json`.

    `video=True` also writes MP4s of the first `video_episodes` evaluated episodes (None: all)
    to `eval/videos/`; their paths are in `result["videos"]`. `write=False` writes nothing into
    the run folder, so it does not combine with `video=True` (the videos would replace those
    the folder's `eval/results.json` names). `named` is the user code named on the command line
    (see `envs/trust.py`): a checkpoint whose env needs other code is refused.
    """
    from rltrain.config.schema import EvalRunConfig

    request = EvalRunConfig(str(ckpt), episodes, deterministic, seed, device, num_envs, video,
                            video_episodes)
    _check_request(request, write)
    path, payload, cfg = load_checkpoint(ckpt, device, named)
    if write or video:
        from rltrain.checkpoint.run_dir import require_writable

        require_writable(RunDir.of_checkpoint(path).eval_results.parent,
                         "evaluate writes eval/results.json into the run folder (copy the run "
                         "somewhere writable; from Python, write=False)")
    n = min(num_envs, episodes)
    videos: list[Any] = []
    folder = RunDir.of_checkpoint(path).eval_videos
    with torch_threads(), _staged(folder if video else None) as staging:  # threads given back
        if staging is not None:
            k = episodes if video_episodes is None else min(video_episodes, episodes)
            from rltrain.video import make_recording_env

            env = make_recording_env(cfg.env, device, episode_targets(k, n), staging, videos)
        else:
            from rltrain.envs.make import make_env

            env = make_env(cfg.env, device, num_envs=n, training=False)
        try:
            algo = build_agent(cfg, env, payload, path, device)
            deterministic, note = _mode(algo.policy, cfg.algo.name, deterministic)
            with torch.random.fork_rng():  # `seed` also fixes stochastic actions; caller's RNG kept
                torch.manual_seed(seed)
                result = run_episodes(algo.policy, env, episodes, deterministic, seed)
        finally:
            env.close()
    result.update(checkpoint=str(path), algo=cfg.algo.name, env=cfg.env.id,
                  deterministic=deterministic, seed=seed,
                  global_step=int(payload.get("counters", {}).get("global_step", 0)))
    if note is not None:
        result["note"] = note
    if video:
        from rltrain.video import number_like_results, publish_videos

        numbered = number_like_results(videos, result["returns"])
        result["videos"] = [str(p) for p in publish_videos(numbered, folder, staging)]
    if write:
        out = RunDir.of_checkpoint(path).eval_results
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        result["results_path"] = str(out)
    return result


def _check_request(request: Any, write: bool) -> None:
    """Refuse (one line), before any work, what `evaluate` cannot do: its arguments as
    `rltrain eval` checks them (an `EvalRunConfig`), videos without writing, video without
    its extra."""
    request.validate()
    if request.video and not write:
        raise UserError("evaluate(video=True, write=False): videos are written to the run's "
                        "eval/videos/ beside eval/results.json; pass write=True, or video=False")
    if request.video:
        from rltrain.video import require_av

        require_av()  # a missing extra fails now, before any episode runs


def _staged(folder: Path | None) -> Any:
    """`video.staged_videos(folder)`, or a context giving None when there is no video."""
    if folder is None:
        return contextlib.nullcontext()
    from rltrain.video import staged_videos

    return staged_videos(folder)


def load_checkpoint(ckpt: str | Path, device: str = "cpu", named: NamedCode | None = None,
                    ) -> tuple[Path, dict[str, Any], Any]:
    """(resolved path, payload, validated `TrainConfig`) of a checkpoint file or run dir.

    Refuses a checkpoint whose env names code (a module) that `named` does not name.
    """
    from rltrain.checkpoint.payload import EVAL
    from rltrain.config.validation import to_train_config
    from rltrain.envs.atari import check_frame_layout

    refuse_seed_batch(ckpt)
    path = checkpoint.resolve(ckpt)
    payload = checkpoint.load(path, map_location=device, require=EVAL)
    cfg = to_train_config(payload["config"])
    require_named(cfg.env, named, str(path))
    check_frame_layout(cfg.env, cfg.algo.net.encoder, payload["algo"], str(path))
    return path, payload, cfg


def refuse_seed_batch(ckpt: str | Path) -> None:
    """A one-line `UserError` when `ckpt` is the folder of a several-seed run (`num_seeds=N`):
    it holds one run per seed in `seed_<s>/` and no policy of its own, so name those."""
    batch = RunDir(Path(ckpt).expanduser())
    seeds = batch.seed_folders()
    if not seeds or batch.latest.is_file():
        return
    shown = [f"ckpt={batch.seed(s).root}" for s in seeds[:3]]
    more = f" (or another of its {len(seeds)} seeds)" if len(seeds) > 3 else ""
    raise UserError(f"{batch.root} is a batch of {len(seeds)} seeds, one run each in "
                    f"seed_<s>/, with no policy of its own: pick one, {' or '.join(shown)}{more}")


def build_agent(cfg: Any, env: VecEnv, payload: dict[str, Any], path: Path, device: str) -> Any:
    """The checkpoint's algorithm rebuilt for `env`, weights loaded; `env` gets the stored
    normalizer statistics. Evaluation and export both rebuild agents here.

    Like training, this applies the run's `torch_threads` to the process: with torch's default
    (every core) a 5-env CartPole eval took 6-9 s instead of 0.34 s on a busy 2-core machine.
    """
    from rltrain.config.registry import get_algo_spec
    from rltrain.envs.make import load_env_state

    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    load_env_state(env, payload.get("env", {}))
    algo = get_algo_spec(cfg.algo.name).build(cfg.algo, env.spec, device)
    load_algo(algo, payload["algo"], path)
    return algo


def load_algo(algo: Any, state: dict[str, Any], path: Path) -> None:
    """Load weights into `algo`; a shape mismatch is a one-line `UserError`."""
    try:
        algo.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise UserError(f"{path}: network weights do not match the stored config ({first})") from exc
