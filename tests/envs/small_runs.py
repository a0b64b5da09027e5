"""The overrides of a short run of any algorithm on a test env (a few hundred steps, 2 envs,
2 evaluation episodes, checkpoints halfway for resume tests), shared by the space tests."""

from __future__ import annotations

from rltrain.config.registry import ALGOS


def small_run(algo: str, env_id: str, steps: int = 192, *extra: str) -> list[str]:
    """Off-policy runs save their replay (so a resume is exact); algorithms without Discrete
    actions get the env's Box actions (`+env.kwargs.box=true`)."""
    box = "discrete" not in ALGOS[algo.removesuffix("_lstm")].action_kinds
    out = [f"algo={algo}", f"env.id={env_id}", "env.num_envs=2", f"total_timesteps={steps}",
           "algo.hidden_sizes=[16]", "eval.episodes=2", "eval.num_envs=2", "logger=none",
           "progress=off", f"checkpoint.freq={steps // 2}",
           *(["+env.kwargs.box=true"] if box else [])]
    if algo in ("ppo", "ppo_lstm"):
        out += ["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=2"]
    elif algo == "a2c":
        out += ["algo.n_steps=8"]
    else:
        out += ["algo.learning_starts=32", "algo.batch_size=16", "algo.buffer_size=500",
                "checkpoint.save_buffer=true", *(["algo.train_freq=4"] if algo == "dqn" else [])]
    return out + list(extra)
