"""The overrides of a short run of any algorithm on a test env (a few hundred steps, 2 envs,
2 evaluation episodes, checkpoints halfway for resume tests), and the check that such a run's
checkpoint evaluates and resumes exactly, shared by the space tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from rltrain.checkpoint import format as checkpoint
from rltrain.config.registry import ALGOS
from rltrain.config.validation import to_train_config
from rltrain.envs.trust import NamedCode
from rltrain.evaluation.command import evaluate
from rltrain.runner.runner import Runner


def small_run(algo: str, env_id: str, steps: int = 192, *extra: str) -> list[str]:
    """Off-policy runs save their replay (so a resume is exact); algorithms without Discrete
    actions get the env's Box actions (`+env.kwargs.box=true`)."""
    box = "discrete" not in ALGOS[algo.removesuffix("_lstm")].action_kinds
    out = [f"algo={algo}", f"env.id={env_id}", "env.num_envs=2", f"total_timesteps={steps}",
           "algo.hidden_sizes=[16]", "eval.episodes=2", "eval.num_envs=2", "logger=none",
           "progress=off", f"checkpoint.freq={steps // 2}",
           *(["+env.kwargs.box=true"] if box else [])]
    if algo in ("ppo", "ppo_lstm", "pqn"):  # minibatch epochs
        out += ["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=2"]
    elif algo == "a2c":
        out += ["algo.n_steps=8"]
    elif algo == "trpo":
        out += ["algo.n_steps=16", "algo.batch_size=16", "algo.n_critic_updates=2"]
    elif algo == "ars":  # one-step rollouts; 4 episodes a generation
        out += ["algo.n_delta=2"]
    else:
        out += ["algo.learning_starts=32", "algo.batch_size=16", "algo.buffer_size=500",
                "checkpoint.save_buffer=true", *(["algo.train_freq=4"] if algo == "dqn" else []),
                *(["algo.critic_hidden_sizes=[16]"] if algo == "crossq" else [])]
    return out + list(extra)


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The tensors of the policy (or of the whole algorithm) in the run's `final.pt`."""
    payload = checkpoint.load(run_dir / "checkpoints" / "final.pt")
    policy = payload["algo"]["policy"] if "policy" in payload["algo"] else payload["algo"]
    return {k: v for k, v in policy.items() if isinstance(v, torch.Tensor)}


def assert_evaluates_and_resumes_exactly(run_dir: Path, tmp_path: Path, trusted: NamedCode) -> None:
    """The finished run in `run_dir`: its checkpoint alone rebuilds the agent (`rltrain eval`,
    the env's module named as `trusted`), and resumed from its first periodic checkpoint it ends
    with the same final weights."""
    again = evaluate(run_dir, episodes=2, named=trusted)
    assert again["episodes"] == 2 and np.isfinite(again["mean_reward"])
    half = checkpoint.load(sorted((run_dir / "checkpoints").glob("step_*.pt"))[0])
    Runner(to_train_config(half["config"]), tmp_path / "resumed", resume_from=half).run()
    a, r = final_weights(run_dir), final_weights(tmp_path / "resumed")
    assert a.keys() == r.keys() and all(torch.equal(a[k], r[k]) for k in a)
