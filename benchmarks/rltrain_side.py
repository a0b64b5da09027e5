"""The rltrain side of the speed benchmark: time to threshold, throughput and scaling.

Time to threshold follows the issue's protocol: evaluate every 2,000 env steps (at the first
iteration end past each multiple; an on-policy rollout is one policy, so evaluating inside it would
only repeat the previous update's policy) with 5 deterministic episodes, and keep the time spent
running evaluation episodes off the training clock. Checkpoint writes and logging stay on it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

# Overrides on top of each task's tuned preset (conf/tuned/). `speed` rows are what the
# benchmark runs by default; each list is exactly what a user would type on the command line.
COMMON = ["progress=off", "logger=none", "checkpoint.freq=0", "eval.num_envs=5"]


def compose(algo: str, env: str, seed: int, overrides: list[str]) -> Any:
    """A validated `TrainConfig` composed exactly as the CLI composes it."""
    from rltrain.config.overrides import compose_checked, env_choices
    from rltrain.config.store import register_configs
    from rltrain.config.validation import to_train_config

    ov = [f"algo={algo}", f"env={env}", f"seed={seed}", *COMMON, *overrides]
    register_configs(env_choices(ov))
    return to_train_config(compose_checked("config", ov))


def time_to_threshold(algo: str, env: str, seed: int, threshold: float,
                      overrides: list[str], eval_every: int = 2000, eval_episodes: int = 5,
                      budget: int | None = None, extra_evals: int | None = None) -> dict[str, Any]:
    """Train one seed; returns steps and training seconds to the first eval ≥ `threshold`.

    With `extra_evals=k` training stops `k` evaluations after the first one ≥ `threshold` (the
    SB3 side's `budget="until_solved_plus"`); the last evaluation is the final return.
    """
    extra = [f"eval.freq={eval_every}", f"eval.episodes={eval_episodes}"]
    if budget is not None:
        extra.append(f"total_timesteps={budget}")
    cfg = compose(algo, env, seed, [*overrides, *extra])

    def stop_when_held(state: Any, curve: list[tuple[int, float, float]]) -> None:
        hits = [i for i, (_, _, r) in enumerate(curve) if r >= threshold]
        if extra_evals is not None and hits and len(curve) - 1 - hits[0] >= extra_evals:
            state.stop = True

    run = timed_run(cfg, stop_when_held)
    return summarize_curve(run["curve"], threshold, run["final"]["mean_reward"],
                           run["train_seconds"], run["runner"].state.global_step)


def timed_run(cfg: Any, on_eval: Any = None) -> dict[str, Any]:
    """Train `cfg` through the `Runner` in a temporary folder, evaluation time off the clock.

    Returns `runner`, `final` (its final eval result), `train_seconds` and `curve`
    [(env steps, training seconds, eval mean return)]; `on_eval(state, curve)` runs after each
    new evaluation and may set `state.stop`.
    """
    import rltrain.runner.runner as runner_mod
    from rltrain.runner.runner import Runner

    clock = {"eval": 0.0, "start": 0.0}
    curve: list[tuple[int, float, float]] = []
    original = runner_mod.run_episodes

    def timed_episodes(*args: Any, **kwargs: Any) -> dict[str, Any]:
        t = time.perf_counter()
        result = original(*args, **kwargs)
        clock["eval"] += time.perf_counter() - t
        return result

    def record(state: Any) -> None:
        last = state.last_eval
        if last is not None and (not curve or curve[-1][0] != last["step"]):
            seconds = time.perf_counter() - clock["start"] - clock["eval"]
            curve.append((last["step"], seconds, last["mean_reward"]))
            if on_eval is not None:
                on_eval(state, curve)

    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(cfg, Path(tmp) / "run")
        runner.add_callback("post_iteration", record)
        runner_mod.run_episodes = timed_episodes
        try:
            clock["start"] = time.perf_counter()
            final = runner.run()
            train_seconds = time.perf_counter() - clock["start"] - clock["eval"]
        finally:
            runner_mod.run_episodes = original
    record(runner.state)  # the final evaluation, when it ran after the last iteration
    return {"runner": runner, "final": final, "train_seconds": train_seconds, "curve": curve}


def summarize_curve(curve: list[tuple[int, float, float]], threshold: float, final_return: float,
                    train_seconds: float, total_steps: int) -> dict[str, Any]:
    """The benchmark record of one run (same keys as the SB3 side)."""
    hit = next(((s, t) for s, t, r in curve if r >= threshold), None)
    return {
        "steps_to_threshold": hit[0] if hit else None,
        "seconds_to_threshold": hit[1] if hit else None,
        "final_return": final_return,
        "solved": hit is not None and final_return >= threshold,
        "train_seconds": train_seconds,
        "total_steps": total_steps,
        "sps": total_steps / train_seconds if train_seconds > 0 else float("nan"),
        "curve": curve,
    }


def collection_sps(env: str, num_envs: int, vectorization: str = "sync", backend: str = "gymnasium",
                   algo: str = "ppo", seconds: float = 2.0) -> float:
    """Env steps/s of the on-policy loop's rollouts (act, env step, storage: `runner/on_policy.py`
    `collect`, timed from `pre_rollout` to `post_rollout`), an untrained policy learning as it
    goes; the updates between rollouts are off the clock. The first rollout is a warm-up."""
    from rltrain.runner.runner import Runner

    overrides = [f"env.num_envs={num_envs}", f"env.vectorization={vectorization}",
                 f"env.backend={backend}", "algo.n_steps=64", "algo.batch_size=64",
                 "algo.n_epochs=1", "total_timesteps=100000000", "eval.freq=0"]
    cfg = compose(algo, env, 0, overrides)
    clock = {"rollouts": 0, "seconds": 0.0, "opened": 0.0}

    def opened(state: Any) -> None:
        clock["opened"] = time.perf_counter()

    def closed(state: Any) -> None:
        clock["rollouts"] += 1
        if clock["rollouts"] > 1:  # the first rollout is a warm-up, off the clock
            clock["seconds"] += time.perf_counter() - clock["opened"]
        state.stop = clock["seconds"] >= seconds

    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(cfg, Path(tmp) / "run")
        runner.add_callback("pre_rollout", opened)
        runner.add_callback("post_rollout", closed)
        runner.run()
    return (clock["rollouts"] - 1) * 64 * num_envs / clock["seconds"]


def ppo_minibatch_updates_per_second(env: str = "CartPole-v1", batch_size: int = 256,
                                     seconds: float = 2.0) -> float:
    """PPO minibatch gradient steps per second on a random rollout of the env's shapes."""
    import torch

    from rltrain.config.registry import get_algo_spec
    from rltrain.types import RolloutBatch

    cfg = compose("ppo", env, 0, [f"algo.batch_size={batch_size}", "algo.n_epochs=1",
                                  f"algo.n_steps={batch_size * 8}", "env.num_envs=1"])
    from rltrain.envs.make import make_env

    venv = make_env(cfg.env, "cpu", num_envs=1)
    algo = get_algo_spec("ppo").build(cfg.algo, venv.spec, "cpu")
    venv.close()
    n = batch_size * 8
    obs = torch.randn(n, *venv.spec.obs_shape)
    actions, log_probs, values = algo.act(obs)
    batch = RolloutBatch(obs, actions, log_probs, values, torch.randn(n), torch.randn(n))
    return _rate(lambda: algo.update(batch), 8, seconds)


def sac_gradient_steps_per_second(env: str = "Pendulum-v1", seconds: float = 2.0) -> float:
    """SAC gradient steps per second (critic + actor + α) with the tuned preset's sizes."""
    import torch

    from rltrain.config.registry import get_algo_spec
    from rltrain.envs.make import make_env
    from rltrain.types import TransitionBatch

    cfg = compose("sac", env, 0, [])
    venv = make_env(cfg.env, "cpu", num_envs=1)
    algo = get_algo_spec("sac").build(cfg.algo, venv.spec, "cpu")
    venv.close()
    b = cfg.algo.batch_size
    obs_shape, adim = venv.spec.obs_shape, venv.spec.action_dim
    batch = TransitionBatch(torch.randn(b, *obs_shape), torch.rand(b, adim) * 2 - 1, torch.randn(b),
                            torch.randn(b, *obs_shape), torch.zeros(b))
    return _rate(lambda: algo.update(batch, 10_000), 1, seconds)


def _rate(fn: Any, per_call: int, seconds: float) -> float:
    """Calls of `fn` per second × `per_call`, after one warm-up call."""
    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls * per_call / (time.perf_counter() - t0)
