"""Learning-quality benchmark: rltrain's tuned presets against SB3 with RL-Zoo's settings.

    python benchmarks/quality.py                                   # every task, both sides, seeds 0-2
    python benchmarks/quality.py --tasks dqn:MountainCar-v0 --sides sb3 --seeds 0 1
    python benchmarks/quality.py --report                          # only rewrite quality.md

Each task (algo, env id) trains for the same env-step budget on both sides: rltrain with its tuned
preset (conf/tuned/), Stable-Baselines3 with RL-Zoo's hyperparameters (benchmarks/sb3_side.py).
Every run ends with a final deterministic evaluation of 10 episodes; `seconds` is the training
wall-clock (rltrain: evaluation episodes off the clock, periodic evaluation off; SB3: the
`learn()` call). Results are merged into benchmarks/results/quality.json keyed by task, side and
seed (a rerun replaces that one entry), so runs split across sessions accumulate;
quality.md is regenerated from everything in the json. A task passes when its rltrain median
reaches the floor and, where the task says so, the SB3 median too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SIDES = ("rltrain", "sb3")
"""The sides quality.md sets side by side."""
RUN_SIDES = (*SIDES, "sbx")
"""What `--sides` runs: SBX (RL-Zoo's settings on Stable-Baselines-Jax, from `.venv-sbx`) is
recorded for `fastest_recipe.py`, not shown in quality.md."""
TIME_TARGET = 0.33
"""Issue 46's target: rltrain's median training seconds at most this share of SB3's."""
DEFAULT_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Task:
    """One benchmark row: the budget both sides train for and what the rltrain median must reach."""

    budget: int
    floor: float
    beat_sb3: bool = False
    """The rltrain median must also be >= the SB3 median."""
    preset: str | None = None
    """The conf/tuned/ preset to apply explicitly (None: the one the `env` option picks)."""
    env_overrides: tuple[str, ...] = ()
    """How the rltrain side selects the env (default: `env=<id>`)."""
    note: str = ""
    overrides: tuple[str, ...] = field(default=())
    """Extra rltrain overrides."""
    time_floor: str = ""
    """For a row above TIME_TARGET: the cheapest settings measured that hold the return, timed,
    and the update's matrix-product floor (update_floor.md); shown instead of a blank."""
    algo: str | None = None
    """The rltrain `algo=` option and the RL-Zoo entry's algo, when the row's key is a label
    (`ppo_gsde`); None: the key's algo."""
    metric: str = "mean_reward"
    """What the final evaluation scores: the mean return, or `success_rate` (a goal env's share
    of evaluation episodes whose last step reported `is_success`)."""
    sb3_from: str | None = None
    """The task (`algo:env`) whose SB3 runs this row shows: a row that changes only rltrain's
    side (another engine) beside the same SB3 runs, not re-run."""


BREAKOUT_FLOOR = ("products 0.25 (update_floor.md: the Nature CNN's convolutions and products, "
                  "71% of the update, timed 2026-11-27 beside one other benchmark, against SB3's "
                  "seconds of 2026-11-24); the update, not the envs, is most of the run, so a "
                  "faster engine saves ~1/5 at most (env_engines.md); not re-run (25 min a seed "
                  "a side)")

# (algo, env id) -> Task. The table, then the CartPole / Pendulum rows kept from before.
TASKS: dict[tuple[str, str], Task] = {
    ("sac", "HalfCheetah-v5"): Task(100_000, 3000.0, beat_sb3=True, preset="sac_halfcheetah"),
    ("sac", "Hopper-v5"): Task(100_000, 1000.0, beat_sb3=True, preset="sac_hopper",
        time_floor="products 0.30 (update_floor.md); the preset is the lightest tried that holds: 128x128 and 2 gradient steps per env step (0.65; 256x256 with 1: 0.80)"),
    ("ppo", "HalfCheetah-v5"): Task(1_000_000, 1500.0, beat_sb3=True, preset="ppo_halfcheetah",
        time_floor="products 0.12 (update_floor.md); no lighter preset tried (18 min a seed)"),
    ("ppo", "LunarLander-v3"): Task(1_000_000, 200.0, preset="ppo_lunarlander"),
    ("dqn", "LunarLander-v3"): Task(100_000, 100.0, preset="dqn_lunarlander",
        time_floor="products 0.26 (update_floor.md); lighter nets lose seeds: [128,128] (0.31-0.42) and [64,64] with double Q (0.25-0.28) leave 2 of 6 seeds below 100 (preset_trials.md)"),
    ("sac", "LunarLanderContinuous-v3"): Task(300_000, 200.0, preset="sac_lunarlander_continuous",
        time_floor="products 0.56 with the 400x300 preset (update_floor.md); 64x64 (0.13-0.25) holds the floor "
                   "but its medians, 264.3 and 251.4 on two code versions, sit below SB3's; 128x128 left seeds 0 "
                   "and 1 below 200 (preset_trials.md)"),
    ("sac", "MountainCarContinuous-v0"): Task(50_000, 90.0, preset="sac_mountaincar_continuous",
        time_floor="products 0.09 (update_floor.md); batch 256 kept (0.47 on 2026-11-25; 512: 0.62); 16 of 32 gradient steps (0.24-0.27) leave 2 of 6 seeds below 90 (preset_trials.md)"),
    ("dqn", "MountainCar-v0"): Task(120_000, -110.0, preset="dqn_mountaincar",
        time_floor="products 0.30 (update_floor.md); [128,128] (0.43-0.47), [64,64] (0.36-0.39) and half the gradient steps (0.47-0.53) end below -110 (preset_trials.md)"),
    # issue 15: gSDE (RL-Zoo 88.3 at 20k), memory (RL-Zoo: 500, -218, 91.5), plain PPO beside it
    ("ppo", "MountainCarContinuous-v0"): Task(20_000, 85.0, preset="ppo_mountaincar_continuous",
        time_floor="products 0.01 (update_floor.md: the loop\'s fixed costs dominate); 5 epochs kept (0.39 on 2026-11-26; 10: ~0.7); 4 epochs (0.33-0.43) end below 85 (preset_trials.md)"),
    ("ppo_lstm", "CartPoleNoVel-v1"): Task(100_000, 475.0, preset="ppo_lstm_cartpole_novel"),
    ("ppo_lstm", "PendulumNoVel-v1"): Task(100_000, -218.0, preset="ppo_lstm_pendulum_novel"),
    ("ppo_lstm", "MountainCarContinuousNoVel-v0"): Task(
        300_000, 85.0, preset="ppo_lstm_mountaincar_continuous_novel"),
    # gSDE over the Pendulum preset (docs/algorithms.md's command); until 2026-11-27 RL-Zoo's
    # whole gSDE entry over it (4 envs, batch 64: 16k gradient steps), which ended at a median of
    # -172.1 on 5 seeds, 0.1 under the floor, in about SB3's time (preset_trials.md)
    ("ppo_gsde", "Pendulum-v1"): Task(100_000, -172.0, algo="ppo", overrides=(
        "algo.use_sde=true", "algo.sde_sample_freq=4", "algo.log_std_init=-0.69"),
        preset="ppo_pendulum", beat_sb3=True,
        note="gSDE over the Pendulum preset: RL-Zoo's sample freq 4 and SB3's log std 0 in env "
             "units; SB3: RL-Zoo's gSDE entry"),
    ("ppo", "CartPoleNoVel-v1"): Task(100_000, 0.0, preset="ppo_cartpole",
                                      note="contrast: no memory, no floor"),
    ("ppo", "ALE/Breakout-v5"): Task(250_000, 8.0, preset="ppo_atari",
                                     env_overrides=("env.id=ALE/Breakout-v5",),
                                     note="1M frames = 250k agent steps (frame skip 4)",
                                     time_floor=BREAKOUT_FLOOR),
    # issue 56: the same row with ale-py's C++ engine stepping the envs (env.backend=ale)
    ("ppo_ale", "ALE/Breakout-v5"): Task(250_000, 8.0, algo="ppo", preset="ppo_atari",
                                         env_overrides=("env.id=ALE/Breakout-v5",),
                                         overrides=("env.backend=ale",),
                                         sb3_from="ppo:ALE/Breakout-v5",
                                         note="the row above on ale-py's C++ engine "
                                              "(2026-11-28, beside one or two other jobs); "
                                              "its reset takes 0-29 no-ops then FIRE, the "
                                              "row above's 1-30; SB3: that row's runs",
                                         time_floor=BREAKOUT_FLOOR),
    ("ppo", "CartPole-v1"): Task(100_000, 475.0),
    ("ppo", "Pendulum-v1"): Task(100_000, -200.0),
    ("sac", "Pendulum-v1"): Task(20_000, -200.0),
    ("td3", "Pendulum-v1"): Task(20_000, -200.0),
    ("ddpg", "Pendulum-v1"): Task(20_000, -200.0),
    ("dqn", "CartPole-v1"): Task(50_000, 475.0),
    ("a2c", "CartPole-v1"): Task(500_000, 475.0),
    # issue 55: SB3-contrib's algorithms, its own implementation beside each (RL-Zoo's entries)
    ("qrdqn", "CartPole-v1"): Task(50_000, 200.0, beat_sb3=True, preset="qrdqn_cartpole",
        note="RL-Zoo publishes 500; before the target copy moved ahead of each gradient burst "
             "(2026-11-28, as SB3), seeds 0-2 ended at 223.4, 231.9, 261.1",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); no lighter preset measured"),
    ("qrdqn", "LunarLander-v3"): Task(100_000, 100.0, beat_sb3=True, preset="qrdqn_lunarlander",
        note="the DQN row's floor (RL-Zoo publishes no QR-DQN LunarLander figure); rltrain's "
             "seeds compiled beside two to four other jobs (2026-11-28); SB3-contrib's seed 0 "
             "ran over 45 CPU-minutes without finishing: not run yet",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); no lighter preset measured"),
    ("ppo", "LunarLanderContinuous-v3"): Task(2_000_000, 200.0, preset="ppo_lunarlander_continuous",
        note="RL-Zoo's PPO values (its LunarLanderContinuous entry) for 2M steps, RL-Zoo's 1M "
             "doubled: the fastest-recipe candidate beside the SAC row (SB3's PPO side not run); "
             "seed 0 ran from benchmarks' own script with the preset's values as overrides, "
             "beside two other jobs"),
    ("ppo_2m", "LunarLander-v3"): Task(2_000_000, 200.0, algo="ppo", preset="ppo_lunarlander",
        sb3_from="ppo:LunarLander-v3",
        note="the PPO row's preset (RL-Zoo's values) for 2M steps, beside SB3's 1M runs: a "
             "fastest-recipe candidate for SB3's median, which the 1M row misses; beside two "
             "to three other jobs (2026-11-29)",
        time_floor="twice SB3's budget on purpose (the fastest recipe to SB3's 1M median); at "
                   "1M the PPO row above takes 0.17 of SB3's time and ends at 257.4"),
    ("pqn", "LunarLander-v3"): Task(2_000_000, 200.0, preset="pqn_lunarlander",
        note="SB3 has no PQN; set against the DQN row on time to the same return in "
             "pqn_vs_dqn.md"),
    ("tqc", "Hopper-v5"): Task(100_000, 1000.0, beat_sb3=True, preset="tqc_hopper",
        note="rltrain's preset since 2026-11-28: RL-Zoo's entry with rltrain's SAC Hopper "
             "lessons (128x128, 2 gradient steps per env step, critic lr 1e-3), compiled; "
             "RL-Zoo's own values gave 593.4, 655.0, 1840.2, 725.7, 745.0 (median 725.7), SB3's "
             "tanh correction over them 723.5, 1076.9, 836.3, 2018.1 (benchmarks/results/"
             "README.md); one update checked equal to SB3-contrib's on the same weights, batch "
             "and noise",
        time_floor="not tried: lighter than SAC Hopper's preset"),
    ("tqc", "HalfCheetah-v5"): Task(100_000, 3000.0, beat_sb3=True, preset="tqc_halfcheetah",
        note="rltrain's preset since 2026-11-28: SAC HalfCheetah's lessons (5k random steps, "
             "critic lr 1e-3) at 128x128 (64x64 gave 4652 on seed 0); SB3-contrib with "
             "RL-Zoo's TQC settings (256x256, 10k random steps)",
        time_floor="not tried: 64x64 fell below SB3-contrib's return"),
    # ARS: rltrain with 2 x n_delta envs, a generation's episodes side by side (the same
    # episodes as one env's one after another; docs/algorithms.md), SB3-contrib with RL-Zoo's 1
    ("ars", "Swimmer-v5"): Task(2_000_000, 0.0, beat_sb3=True, preset="ars_swimmer",
        overrides=("env.num_envs=2",),
        note="rltrain with 2 envs (n_delta 1: a generation's 2 episodes side by side); RL-Zoo "
             "publishes 355.3 for one Swimmer-v3 run; both sides split by seed (SB3-contrib: "
             "206, 206, 353; rltrain: -12.5, 19.7, 329): 3 seeds cannot tell them apart",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); ARS runs one on-policy iteration per vector step "
                   "(algo.n_steps=1: rollout finish, GAE, end-of-iteration checks), about a "
                   "third of its loop in a 40k-step profile (2026-11-29)"),
    ("ars", "Pendulum-v1"): Task(2_000_000, -250.0, beat_sb3=True, preset="ars_pendulum",
        overrides=("env.num_envs=8",),
        note="rltrain with 8 envs (2 x n_delta: a generation side by side); RL-Zoo publishes "
             "-212.5 for one run",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings)"),
    ("sac", "FetchReach-v4"): Task(20_000, 0.9, beat_sb3=True, metric="success_rate",
        note="HER; success rate of the 10 final episodes, not the return; SB3: HER + SAC, "
             "RL-Zoo's FetchReach entry (1 critic, VecNormalize); needs the robotics extra, "
             "whose mujoco pin (<3.12) is installed in a venv of its own",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); no lighter preset measured"),
    ("trpo", "Hopper-v5"): Task(1_000_000, 1000.0, beat_sb3=True, preset="trpo_hopper",
        note="RL-Zoo's Hopper-v4 entry on both sides (normalized obs and reward, 2 envs x 1024 "
             "steps, 20 critic epochs); the two sides ran at once, beside the test suite for part of the time (2026-11-29)",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); the run is collection-bound (500k vector steps of 2 envs, "
                   "a policy and value forward each; the update took 16% of a profiled 16k-step "
                   "run); 8 envs x 256 steps (the same 2048-step batch): seeds 0-1 3653.5, 3207.8 "
                   "in 644, 483 s (0.38, 0.28); not kept yet (preset_trials.md)"),
    ("trpo", "Pendulum-v1"): Task(100_000, -200.0, beat_sb3=True, preset="trpo_pendulum",
        time_floor="not tried: RL-Zoo's settings on both sides (issue 55 compares quality at "
                   "equal settings); no lighter preset measured"),
}


def task_key(algo: str, env: str) -> str:
    """The task's name on the command line and in the json: `algo:env`."""
    return f"{algo}:{env}"


def parse_task(text: str) -> tuple[str, str]:
    """`algo:env` -> (algo, env); the env id may hold a slash (`ppo:ALE/Breakout-v5`)."""
    algo, sep, env = text.partition(":")
    if not sep or (algo, env) not in TASKS:
        known = ", ".join(task_key(a, e) for a, e in TASKS)
        raise SystemExit(f"unknown task {text!r}; known: {known}")
    return algo, env


def rltrain_overrides(algo: str, env: str, seed: int) -> list[str]:
    """The command line of the rltrain side (what a user would type), budget included."""
    task = TASKS[(algo, env)]
    ov = [f"algo={task.algo or algo}", *(task.env_overrides or (f"env={env}",))]
    if task.preset is not None:
        ov.append(f"tuned={task.preset}")
    return [*ov, f"seed={seed}", f"total_timesteps={task.budget}", "eval.freq=0",
            "eval.episodes=10", "checkpoint.freq=0", "progress=off", "logger=none",
            *task.overrides]


def run_rltrain(algo: str, env: str, seed: int) -> dict:
    """Train one seed with the tuned preset; final eval and training seconds (eval off the clock)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from rltrain_side import timed_run

    from rltrain.config.compose import compose_train_config
    from rltrain.envs.engines.choice import choose

    cfg = compose_train_config(rltrain_overrides(algo, env, seed))
    engine = choose(cfg.env, cfg.env.num_envs or 1).backend  # auto: EnvPool where installed and faster
    run = timed_run(cfg)
    if run["final"].get("stopped"):  # a signal or STOP file: no final eval, nothing to record
        raise SystemExit(f"{task_key(algo, env)} rltrain seed {seed} was stopped "
                         f"({run['final']['stopped']}); nothing recorded")
    metric = TASKS[(algo, env)].metric
    if metric not in run["final"]:
        raise SystemExit(f"{task_key(algo, env)}: the final evaluation gave no {metric} (does "
                         f"the env report info['is_success']?)")
    return {"final_eval": float(run["final"][metric]), "seconds": run["train_seconds"],
            "budget": TASKS[(algo, env)].budget, "preset": cfg.preset, "engine": engine}


def run_sb3(algo: str, env: str, seed: int, library: str = "sb3") -> dict:
    """Train one seed of SB3 (or SBX) with RL-Zoo's hyperparameters for the task's budget."""
    sys.path.insert(0, str(Path(__file__).parent))
    from sb3_side import run_sb3_final

    task = TASKS[(algo, env)]
    run = run_sb3_final(task.algo or algo, env, seed, task.budget, eval_episodes=10,
                        library=library)
    if task.metric != "mean_reward":
        if task.metric not in run:
            raise SystemExit(f"{task_key(algo, env)}: SB3's final evaluation gave no "
                             f"{task.metric}")
        run["mean_reward"], run["final_eval"] = run["final_eval"], run[task.metric]
    return run


def has_side(algo: str, env: str, side: str) -> bool:
    """Whether `side` can run the task (SB3 needs an RL-Zoo entry in sb3_side.RL_ZOO, SBX that
    and a class of the algorithm's name)."""
    if side == "rltrain":
        return True
    if TASKS[(algo, env)].sb3_from is not None:  # shows another row's SB3 runs
        return False
    sys.path.insert(0, str(Path(__file__).parent))
    from sb3_side import RL_ZOO, SBX

    name = TASKS[(algo, env)].algo or algo
    return (name, env) in RL_ZOO and (side == "sb3" or name in SBX)


# ---- results: merge, summarize, markdown (pure functions, tested without training) ----------

def empty_results() -> dict:
    return {"runs": {}}


def load_results(path: Path) -> dict:
    """The json at `path` ({"runs": {task: {side: {seed: record}}}}); the older list format
    (one rltrain record per run, seconds with evaluations included) is read as rltrain runs."""
    if not path.exists():
        return empty_results()
    data = json.loads(path.read_text())
    runs = data.get("runs", {})
    if isinstance(runs, list):  # before the SB3 side: [{"algo", "env", "seed", ...}]
        legacy = empty_results()
        for r in runs:
            record = {"final_eval": r["final_eval"], "seconds": r["seconds"],
                      "budget": r["budget"], "date": r.get("date", "earlier (seconds incl. evals)"),
                      "note": "seconds include evaluations"}
            merge(legacy, task_key(r["algo"], r["env"]), "rltrain", r["seed"], record)
        return legacy
    return {"runs": runs}


def merge(results: dict, task: str, side: str, seed: int, record: dict) -> dict:
    """Put one run's record into `results` (replacing that task/side/seed's previous one)."""
    results.setdefault("runs", {}).setdefault(task, {}).setdefault(side, {})[str(seed)] = record
    return results


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(results: dict, seeds: tuple[int, ...] = DEFAULT_SEEDS) -> list[dict]:
    """One row per task of TASKS that has at least one run: per side the per-seed finals and
    seconds (None where missing), medians over the seeds that ran, the time ratio rltrain/SB3,
    and `status`: "pass", "FAIL" or "missing" (a seed or a needed side has not run yet)."""
    rows = []
    for (algo, env), task in TASKS.items():
        key = task_key(algo, env)
        runs = results.get("runs", {}).get(key)
        if not runs:
            continue
        row: dict = {"task": key, "budget": task.budget, "floor": task.floor,
                     "beat_sb3": task.beat_sb3, "note": task.note,
                     "time_floor": task.time_floor, "sides": {}}
        for side in SIDES:
            mine = runs.get(side, {})
            if side == "sb3" and task.sb3_from is not None:
                mine = results["runs"].get(task.sb3_from, {}).get("sb3", {})
            all_seeds = sorted({*seeds, *(int(s) for s in mine)})
            finals = {s: mine[str(s)]["final_eval"] if str(s) in mine else None for s in all_seeds}
            secs = {s: mine[str(s)]["seconds"] if str(s) in mine else None for s in all_seeds}
            got = [v for v in finals.values() if v is not None]
            row["sides"][side] = {
                "finals": finals, "seconds": secs,
                "median_final": _median(got),
                "median_seconds": _median([v for v in secs.values() if v is not None]),
                "complete": all(str(s) in mine for s in seeds),
                "dates": sorted({mine[s].get("date", "?") for s in mine}),
                # records before the engine was recorded (2026-11-27) all stepped gymnasium
                "engines": sorted({mine[s].get("engine", "gymnasium") for s in mine}),
            }
        ours, theirs = row["sides"]["rltrain"], row["sides"]["sb3"]
        row["time_ratio"] = (ours["median_seconds"] / theirs["median_seconds"]
                             if ours["median_seconds"] and theirs["median_seconds"] else None)
        needed = [ours, theirs] if task.beat_sb3 else [ours]
        if not all(side["complete"] for side in needed):
            row["status"] = "missing"
        else:
            ok = ours["median_final"] >= task.floor
            if task.beat_sb3:
                ok = ok and ours["median_final"] >= theirs["median_final"]
            row["status"] = "pass" if ok else "FAIL"
        rows.append(row)
    return rows


def _side_cell(side: dict) -> str:
    if not side["dates"]:
        return "missing"
    finals = ", ".join("missing" if v is None else f"{v:.1f}" for v in side["finals"].values())
    secs = ", ".join("missing" if v is None else f"{v:.0f}" for v in side["seconds"].values())
    engines = side.get("engines", [])
    stepped = f"; {' and '.join(engines)}" if set(engines) - {"gymnasium"} else ""  # gymnasium unless said
    return f"**{side['median_final']:.1f}** [{finals}]; {side['median_seconds']:.0f} s [{secs}]{stepped}"


def markdown(rows: list[dict]) -> str:
    """The summary as a markdown table: a column per side (median final eval, per-seed finals,
    median and per-seed training seconds), the time ratio, the floor, pass/fail, run dates."""
    lines = [
        "Final deterministic eval (10 episodes) after the budget; **median** [per seed], then "
        "training seconds median [per seed]. rltrain: tuned preset; SB3: RL-Zoo's settings. "
        "time ratio = rltrain / SB3 median seconds. rltrain's envs step with gymnasium unless "
        "the cell names another engine (`env.backend=auto` with the envpool extra installed). "
        "Above the target of "
        f"{TIME_TARGET}: the row's measured time floor (lighter settings tried and their time "
        "ratios; `products`: the update's matrix products alone over SB3's seconds, the lowest "
        "ratio the same networks and update count allow on this CPU).",
        "",
        "| task | budget | rltrain | SB3 (RL-Zoo) | time ratio | above the target: time floor "
        "| return floor | status | run dates |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        floor = f"≥ {r['floor']:g}" + (" and ≥ SB3" if r["beat_sb3"] else "")
        ratio = "missing" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}"
        dates = sorted({d for side in r["sides"].values() for d in side["dates"]})
        task = r["task"] + (f" ({r['note']})" if r["note"] else "")
        over = r["time_ratio"] is not None and round(r["time_ratio"], 2) > TIME_TARGET
        time_floor = (r.get("time_floor") or "not measured") if over else "—"
        lines.append(f"| {task} | {r['budget']:,} | {_side_cell(r['sides']['rltrain'])} | "
                     f"{_side_cell(r['sides']['sb3'])} | {ratio} | {time_floor} | {floor} | "
                     f"{r['status']} | {', '.join(dates)} |")
    return "\n".join(lines)


def write(results: dict, out: Path) -> list[dict]:
    """Write quality.json (results + summary) and quality.md; returns the summary rows."""
    rows = summarize(results)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "quality.json.tmp"
    tmp.write_text(json.dumps({**results, "summary": rows}, indent=2) + "\n")
    tmp.replace(out / "quality.json")
    (out / "quality.md").write_text(markdown(rows) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the selected tasks, sides and seeds one at a time, merging each result as it lands;
    exit 1 if a complete task fails its floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=[task_key(a, e) for a, e in TASKS],
                        help="algo:env pairs, e.g. ppo:CartPole-v1 dqn:MountainCar-v0")
    parser.add_argument("--seeds", nargs="*", type=int, default=list(DEFAULT_SEEDS))
    parser.add_argument("--sides", nargs="*", default=list(SIDES), choices=RUN_SIDES)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--report", action="store_true", help="only regenerate quality.md")
    args = parser.parse_args(argv)
    out = Path(args.out)
    path = out / "quality.json"
    tasks = [parse_task(t) for t in args.tasks]
    if not args.report:
        from importlib import resources

        algo_options = resources.files("rltrain.conf").joinpath("algo")  # ppo_lstm is one
        for algo, env in tasks:
            for side in args.sides:
                option = TASKS[(algo, env)].algo or algo
                if side == "rltrain" and not algo_options.joinpath(f"{option}.yaml").is_file():
                    print(f"skip {algo}:{env} rltrain: algo {algo!r} is not available", file=sys.stderr)
                    continue
                if not has_side(algo, env, side):
                    print(f"skip {algo}:{env} {side}: no RL-Zoo entry"
                          + (" or SBX class" if side == "sbx" else ""), file=sys.stderr)
                    continue
                for seed in args.seeds:
                    t0 = time.perf_counter()
                    record = (run_rltrain(algo, env, seed) if side == "rltrain"
                              else run_sb3(algo, env, seed, library=side))
                    record["date"] = datetime.date.today().isoformat()
                    record["wall_seconds"] = time.perf_counter() - t0
                    print(f"{algo}:{env} {side} seed {seed}: final eval {record['final_eval']:.1f}"
                          f", training {record['seconds']:.1f} s", flush=True)
                    results = load_results(path)  # reread: another process may have merged
                    write(merge(results, task_key(algo, env), side, seed, record), out)
    rows = write(load_results(path), out)
    print(markdown(rows))
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
