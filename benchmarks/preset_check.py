"""Does each tuned preset outside the quality table learn? One seed per preset, short budgets.

    python benchmarks/preset_check.py                                # every task below, seed 0
    python benchmarks/preset_check.py --tasks td3:Hopper-v5 --seeds 0 1
    python benchmarks/preset_check.py --report                       # only rewrite the table

The quality benchmark (`quality.py`) measures the issue's rows against SB3 with three seeds.
The MuJoCo and Box2D presets that `conf/tuned/` ships beyond those rows (PPO on Hopper, Walker2d
and Ant; SAC on Walker2d and Ant; TD3 on the four MuJoCo tasks and LunarLanderContinuous) had
no run on this machine; they are checked here, and so are the CartPole and Pendulum presets
(timed to a threshold by `speed.py`) at their own budgets. A2C's Atari preset runs here on
Breakout; DQN's, whose exploration alone spans 1M agent steps, by none yet.
This trains each through the quality harness's path (the command line a user types, evaluation
off the clock, final deterministic evaluation of 10 episodes) and sets the result beside the
return of uniformly random actions (10 episodes, measured here) and RL-Zoo's published return
(one run, usually at a larger budget, for scale only).

`learned` is a loose sanity line, not a quality floor: the final return closes at least a
quarter of the gap between random actions and RL-Zoo's published return. A preset ships the
budget run here (its `total_timesteps`); RL-Zoo's own budgets are up to 10x or 40x longer, so a
preset that passes has started to learn, no more.
Results merge into benchmarks/results/preset_check.json per task and seed as each run lands.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
GAP_SHARE = 0.25
"""The share of the random-to-published gap a final return must close to count as `learned`."""


@dataclass(frozen=True)
class Check:
    """One preset: the budget it runs for here, the preset the `env=` option must pick, and
    RL-Zoo's published return (benchmark.md, one run, gymnasium's previous version of the env)
    with the budget it was trained for."""

    budget: int
    preset: str
    published: float
    published_budget: str


# (algo, env) -> Check, in the order the default run takes them (cheapest first per family).
CHECKS: dict[tuple[str, str], Check] = {
    ("ppo", "CartPole-v1"): Check(60_000, "ppo_cartpole", 500.0, "100k (v1)"),
    ("dqn", "CartPole-v1"): Check(50_000, "dqn_cartpole", 500.0, "50k (v1)"),
    ("sac", "Pendulum-v1"): Check(20_000, "sac_pendulum", -157.0, "20k (v0)"),
    ("td3", "Pendulum-v1"): Check(20_000, "td3_pendulum", -151.9, "20k (v0)"),
    ("tqc", "Pendulum-v1"): Check(20_000, "tqc_pendulum", -151.3, "20k (v0)"),
    ("pqn", "CartPole-v1"): Check(500_000, "pqn_cartpole", 495.1, "500k (CleanRL, training episodes)"),
    ("a2c", "CartPole-v1"): Check(500_000, "a2c_cartpole", 500.0, "500k (v1)"),
    ("ppo", "Hopper-v5"): Check(1_000_000, "ppo_hopper", 2410.4, "1M (v3)"),
    ("sac", "Walker2d-v5"): Check(100_000, "sac_walker2d", 3863.2, "1M (v3)"),
    ("td3", "HalfCheetah-v5"): Check(100_000, "td3_halfcheetah", 9655.7, "1M (v3)"),
    ("ppo", "Walker2d-v5"): Check(1_000_000, "ppo_walker2d", 3478.8, "1M (v3)"),
    ("sac", "Ant-v5"): Check(100_000, "sac_ant", 4615.8, "1M (v3)"),
    ("td3", "Hopper-v5"): Check(100_000, "td3_hopper", 3606.4, "1M (v3)"),
    ("ppo", "Ant-v5"): Check(1_000_000, "ppo_ant", 1327.2, "1M (v3)"),
    ("td3", "Walker2d-v5"): Check(100_000, "td3_walker2d", 4717.8, "1M (v3)"),
    ("td3", "Ant-v5"): Check(100_000, "td3_ant", 5813.3, "1M (v3)"),
    ("td3", "LunarLanderContinuous-v3"): Check(100_000, "td3_lunarlander_continuous", 207.5,
                                               "300k (v2)"),
    ("a2c", "ALE/Breakout-v5"): Check(250_000, "a2c_atari", 279.8, "10M (NoFrameskip-v4)"),
}


def task_key(algo: str, env: str) -> str:
    return f"{algo}:{env}"


def parse_task(text: str) -> tuple[str, str]:
    """`algo:env` -> (algo, env), one of CHECKS."""
    algo, _, env = text.partition(":")
    if (algo, env) not in CHECKS:
        raise SystemExit(f"unknown task {text!r}; known: "
                         f"{', '.join(task_key(a, e) for a, e in CHECKS)}")
    return algo, env


def overrides(algo: str, env: str, seed: int) -> list[str]:
    """The command line of one run: what a user types, plus the budget and the harness's
    evaluation and logging settings (those of quality.py)."""
    return [f"algo={algo}", f"env={env}", f"seed={seed}",
            f"total_timesteps={CHECKS[(algo, env)].budget}", "eval.freq=0", "eval.episodes=10",
            "checkpoint.freq=0", "progress=off", "logger=none"]


def random_return(env: str, episodes: int = 10, seed: int = 0) -> float:
    """Mean return of uniformly random actions over `episodes` episodes of the raw env."""
    import gymnasium as gym

    from rltrain.envs.families import register_on_demand

    register_on_demand(env)
    e = gym.make(env)
    e.action_space.seed(seed)
    returns = []
    for i in range(episodes):
        e.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = e.step(e.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    e.close()
    return statistics.fmean(returns)


def run_one(algo: str, env: str, seed: int) -> dict:
    """Train one seed of the preset; its final eval, training seconds and the preset applied."""
    sys.path.insert(0, str(Path(__file__).parent))
    from rltrain_side import timed_run

    from rltrain.config.compose import compose_train_config

    check = CHECKS[(algo, env)]
    cfg = compose_train_config(overrides(algo, env, seed))
    if cfg.preset != check.preset:
        raise SystemExit(f"{task_key(algo, env)}: `env={env}` applied preset {cfg.preset!r}, "
                         f"not {check.preset!r}")
    run = timed_run(cfg)
    if run["final"].get("stopped"):
        raise SystemExit(f"{task_key(algo, env)} seed {seed} was stopped "
                         f"({run['final']['stopped']}); nothing recorded")
    return {"final_eval": float(run["final"]["mean_reward"]), "seconds": run["train_seconds"],
            "budget": check.budget, "preset": cfg.preset}


def learned(final: float, random: float, published: float) -> bool:
    """Whether `final` closes GAP_SHARE of the gap from `random` to `published`."""
    return final >= random + GAP_SHARE * (published - random)


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"runs": {}, "random": {}}


def markdown(results: dict) -> str:
    """The table: one row per task that has a run, seeds in order."""
    lines = [
        "# Tuned presets outside the quality table (`benchmarks/preset_check.py`)", "",
        "One run per seed through the quality harness's path (final deterministic evaluation of "
        "10 episodes, training seconds with evaluation off the clock, one torch thread). "
        "`random`: uniformly random actions, 10 episodes. `learned`: the final return closes at "
        f"least {GAP_SHARE:.0%} of the gap from random to RL-Zoo's published return, a sanity "
        "line, not a floor: RL-Zoo's number is one run at its own (larger) budget on the previous "
        "version of the env; each preset ships the budget run here.", "",
        "| task | preset | budget | final [seed: return] | s a seed | random | RL-Zoo published "
        "| learned | date |",
        "|---|---|---|---|---|---|---|---|---|"]
    for (algo, env), check in CHECKS.items():
        runs = results["runs"].get(task_key(algo, env))
        if not runs:
            continue
        random = results["random"].get(env)
        seeds = sorted(runs, key=int)
        finals = ", ".join(f"{s}: {runs[s]['final_eval']:.1f}" for s in seeds)
        secs = ", ".join(f"{runs[s]['seconds']:.0f}" for s in seeds)
        verdict = ("—" if random is None else ", ".join(
            "yes" if learned(runs[s]["final_eval"], random, check.published) else "**no**"
            for s in seeds))
        dates = ", ".join(sorted({runs[s]["date"] for s in seeds}))
        random_cell = "—" if random is None else f"{random:.1f}"
        lines.append(f"| {task_key(algo, env)} | `{check.preset}` | {check.budget:,} | {finals} "
                     f"| {secs} | {random_cell} | {check.published:.1f} at "
                     f"{check.published_budget} | {verdict} | {dates} |")
    missing = [task_key(a, e) for a, e in CHECKS if task_key(a, e) not in results["runs"]]
    if missing:
        lines += ["", f"Not run yet: {', '.join(missing)}."]
    return "\n".join(lines)


def write(results: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "preset_check.json.tmp"
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    tmp.replace(out / "preset_check.json")
    (out / "preset_check.md").write_text(markdown(results) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the selected presets and seeds one at a time, merging each result as it lands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=[task_key(a, e) for a, e in CHECKS])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="only regenerate the table")
    args = parser.parse_args(argv)
    out = Path(args.out)
    path = out / "preset_check.json"
    tasks = [parse_task(t) for t in args.tasks]
    if not args.report:
        for algo, env in tasks:
            results = load(path)
            if env not in results["random"]:
                results["random"][env] = random_return(env)
                write(results, out)
            for seed in args.seeds:
                t0 = time.perf_counter()
                record = run_one(algo, env, seed)
                record["date"] = datetime.date.today().isoformat()
                record["wall_seconds"] = time.perf_counter() - t0
                print(f"{task_key(algo, env)} seed {seed}: final eval {record['final_eval']:.1f}, "
                      f"training {record['seconds']:.1f} s", flush=True)
                results = load(path)  # reread: another process may have merged
                results["runs"].setdefault(task_key(algo, env), {})[str(seed)] = record
                write(results, out)
    results = load(path)
    write(results, out)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
