"""`rltrain eval` and `rltrain.evaluate()`: a saved checkpoint's policy evaluated on fresh envs
(optionally recording MP4s of the evaluated episodes, see `evaluation/video.py`); the result is
written to the run's `eval/results.json`."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import torch

from rltrain.checkpoint.run_dir import RunDir, require_writable
from rltrain.config.schema import EvalRunConfig
from rltrain.envs.engines.choice import for_evaluation
from rltrain.envs.make import make_env
from rltrain.envs.trust import NamedCode
from rltrain.errors import UserError
from rltrain.evaluation.agent import build_agent, load_checkpoint
from rltrain.evaluation.episodes import episode_targets, run_episodes
from rltrain.evaluation.video import (
    make_recording_env,
    number_like_results,
    publish_videos,
    require_av,
    staged_videos,
)
from rltrain.guest import as_guest
from rltrain.threads import torch_threads


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
    request = EvalRunConfig(str(ckpt), episodes, deterministic, seed, device, num_envs, video,
                            video_episodes)
    _check_request(request, write)
    path, payload, cfg = load_checkpoint(ckpt, device, named)
    if write or video:
        require_writable(RunDir.of_checkpoint(path).eval_results.parent,
                         "evaluate writes eval/results.json into the run folder (copy the run "
                         "somewhere writable; from Python, write=False)")
    env_cfg, engine_said = for_evaluation(cfg.env, video)  # the env the run trained on
    n = min(num_envs, episodes)
    videos: list[Any] = []
    folder = RunDir.of_checkpoint(path).eval_videos
    with torch_threads(), _staged(folder if video else None) as staging:  # threads given back
        if staging is not None:
            k = episodes if video_episodes is None else min(video_episodes, episodes)
            # the first k episodes results.json lists, whichever rows end them
            env = make_recording_env(env_cfg, device, episode_targets(episodes, n), staging,
                                     videos, keep=k)
        else:
            env = make_env(env_cfg, device, num_envs=n, training=False)
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
    if engine_said or note:
        result["note"] = "; ".join(said for said in (engine_said, note) if said)
    if video:
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
        require_av()  # a missing extra fails now, before any episode runs


def _staged(folder: Path | None) -> Any:
    """`video.staged_videos(folder)`, or a context giving None when there is no video."""
    if folder is None:
        return contextlib.nullcontext()

    return staged_videos(folder)
