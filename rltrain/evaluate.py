"""Evaluation: deterministic episodes of a policy, and `rltrain eval` on a saved checkpoint."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltrain import checkpoint
from rltrain.envs.vec_env import VecEnv

log = logging.getLogger("rltrain")


@torch.no_grad()
def run_episodes(policy: Any, env: VecEnv, episodes: int, deterministic: bool = True,
                 seed: int | None = None) -> dict[str, Any]:
    """Run exactly `episodes` episodes, spread evenly over the env's rows.

    Each row runs a fixed number of episodes, so short episodes are not over-represented (taking
    the first N to finish would bias the mean towards them). Returns are raw env rewards.
    """
    n = env.spec.num_envs
    targets = np.array([(episodes + i) // n for i in range(n)])
    counts = np.zeros(n, dtype=np.int64)
    returns: list[float] = []
    lengths: list[int] = []
    obs = env.reset(seed)
    while (counts < targets).any():
        res = env.step(policy.act(obs, deterministic=deterministic))
        ep = res.info.get("episode")
        if ep is not None:
            for i, ret, length in zip(ep["index"], ep["return"], ep["length"], strict=True):
                if counts[i] < targets[i]:
                    counts[i] += 1
                    returns.append(float(ret))
                    lengths.append(int(length))
        obs = res.obs
    r = np.asarray(returns)
    return {"episodes": len(returns), "mean_reward": float(r.mean()), "std_reward": float(r.std()),
            "min_reward": float(r.min()), "max_reward": float(r.max()),
            "mean_length": float(np.mean(lengths)), "returns": returns, "lengths": lengths}


def eval_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The `eval/*` scalars of a `run_episodes` result."""
    keys = ("mean_reward", "std_reward", "min_reward", "max_reward", "mean_length")
    return {f"eval/{k}": result[k] for k in keys}


def evaluate(ckpt: str | Path, episodes: int = 10, deterministic: bool = True, seed: int = 1000,
             device: str = "cpu", num_envs: int = 5, write: bool = True) -> dict[str, Any]:
    """Rebuild the agent from a checkpoint alone and evaluate it; writes `eval/results.json`."""
    from rltrain.config import to_train_config
    from rltrain.envs.make import load_env_state, make_env
    from rltrain.registry import get_algo_spec

    path = checkpoint.resolve(ckpt)
    payload = checkpoint.load(path, map_location=device)
    cfg = to_train_config(payload["config"])
    env = make_env(cfg.env, device, num_envs=min(num_envs, episodes), training=False)
    try:
        load_env_state(env, payload.get("env", {}))
        algo = get_algo_spec(cfg.algo.name).build(cfg.algo, env.spec, device)
        load_algo(algo, payload["algo"], path)
        with torch.random.fork_rng():  # `seed` also fixes stochastic actions; caller's RNG kept
            torch.manual_seed(seed)
            result = run_episodes(algo.policy, env, episodes, deterministic, seed)
    finally:
        env.close()
    result.update(checkpoint=str(path), algo=cfg.algo.name, env=cfg.env.id,
                  deterministic=deterministic, seed=seed,
                  global_step=int(payload.get("counters", {}).get("global_step", 0)))
    if write:
        out = results_dir(path) / "results.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        result["results_path"] = str(out)
    return result


def load_algo(algo: Any, state: dict[str, Any], path: Path) -> None:
    """Load weights into `algo`; a shape mismatch is a one-line `UserError`."""
    from rltrain.errors import UserError

    try:
        algo.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise UserError(f"{path}: network weights do not match the stored config ({first})") from exc


def results_dir(ckpt_path: Path) -> Path:
    """`<run>/eval/` for `<run>/checkpoints/x.pt`, else an `eval/` folder beside the file."""
    parent = ckpt_path.parent
    run_dir = parent.parent if parent.name == "checkpoints" else parent
    return run_dir / "eval"
