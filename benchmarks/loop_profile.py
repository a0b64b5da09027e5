"""What one env step of the off-policy loop costs outside the update: Python function calls per
env step (counted by cProfile: the same on a busy machine as on an idle one) and microseconds
per env step (without the profiler), split by the loop's parts.

    python benchmarks/loop_profile.py [--steps 20000] [--rounds 3] [--code DIR ...]
        [--out benchmarks/results]

Each case trains through the `Runner` with one gradient step in all (`train_freq` past the
budget), so what is timed is the loop: acting, the env adapter, the replay insert, episode
records, the end-of-iteration checks. `--code DIR` runs every case against the rltrain checkout
in DIR as well (an older commit: `git worktree add --detach /tmp/before <rev>`), the versions
interleaved round by round in fresh processes, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_io import report  # noqa: E402

# case -> overrides on top of the algorithm's and env's defaults (no tuned preset)
CASES: dict[str, list[str]] = {
    "dqn:CartPole-v1": ["algo=dqn", "env=CartPole-v1", "algo.hidden_sizes=[256,256]"],
    "sac:Pendulum-v1": ["algo=sac", "env=Pendulum-v1", "algo.hidden_sizes=[64,64]"],
    "sac:Pendulum-v1 normalized": ["algo=sac", "env=Pendulum-v1", "algo.hidden_sizes=[64,64]",
                                   "env.normalize_obs=true", "env.normalize_reward=true"],
}
PARTS = {  # part -> the functions whose cumulative time it is (file suffix, function name)
    "act (policy, exploration)": [("runner/members.py", "act")],
    "env adapter and env": [("envs/vec_env.py", "step")],
    "replay insert": [("buffers/replay.py", "add")],
    "episode records": [("runner/episode_stats.py", "record")],
    "end of iteration (checks, progress, hooks)": [("runner/runner.py", "end_iteration")],
}
NORMALIZERS = "normalization wrappers (above the adapter)"


def config(case: str, steps: int) -> Any:
    from rltrain.config.compose import compose_train_config

    return compose_train_config([
        *CASES[case], "seed=0", f"total_timesteps={steps}", "~tuned", "env.num_envs=1",
        "env.backend=gymnasium", "logger=none", "progress=off", "checkpoint.freq=0",
        "eval.freq=1e9", "eval.episodes=1", "eval.background=false", "compile=false",
        "algo.learning_starts=0", f"algo.train_freq={steps * 2}", "algo.gradient_steps=1",
        "algo.buffer_size=100000"])


def one(case: str, steps: int, profiled: bool) -> dict[str, Any]:
    """In this process: train `case` for `steps` env steps; µs per env step, and with
    `profiled` the calls per env step and each part's share."""
    import torch

    torch.set_num_threads(1)
    import rltrain.runner.runner as runner_module
    from rltrain.runner.runner import Runner

    cfg = config(case, steps)
    prof = cProfile.Profile() if profiled else None
    clock: dict[str, float] = {}
    inner = runner_module.run_off_policy

    def timed_loop(runs: Any) -> None:  # the loop alone: no set-up, no final evaluation
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        try:
            inner(runs)
        finally:
            if prof is not None:
                prof.disable()
            clock["seconds"] = time.perf_counter() - t0
            clock["cpu_seconds"] = time.process_time() - c0

    runner_module.run_off_policy = timed_loop
    try:
        with tempfile.TemporaryDirectory() as tmp:
            Runner(cfg, Path(tmp) / "run").run()
    finally:
        runner_module.run_off_policy = inner
    out: dict[str, Any] = {"us_per_step": clock["seconds"] / steps * 1e6,
                           "cpu_us_per_step": clock["cpu_seconds"] / steps * 1e6}
    loop = "run_off_policy"
    if prof is not None:
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        out["calls_per_step"] = sum(v[1] for v in stats.values()) / steps
        loop_total = sum(v[3] for k, v in stats.items() if k[2] == loop)
        parts = {}
        for part, names in PARTS.items():
            parts[part] = sum(v[3] for (f, _, fn), v in stats.items()
                              if any(f.endswith(s) and fn == n for s, n in names))
        stepped = sum(v[3] for (f, _, fn), v in stats.items()
                      if f.endswith("runner/one_run.py") and fn == "step_envs")
        parts[NORMALIZERS] = stepped - parts["env adapter and env"]
        parts["the loop's own lines"] = (
            sum(v[2] for (f, _, fn), v in stats.items() if fn == loop))
        out["profiled_share"] = {k: v / loop_total for k, v in parts.items()} if loop_total else {}
    return out


def spawn(case: str, steps: int, profiled: bool, code: str) -> dict[str, Any]:
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = code
    out = subprocess.run([sys.executable, __file__, "--one", case, str(steps), str(int(profiled))],
                         capture_output=True, text=True, env=env, cwd=code or None)
    if out.returncode != 0:
        raise SystemExit(f"{case} ({code or 'this checkout'}) failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(steps: int, rounds: int, codes: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for case in CASES:
        for code in codes:
            got = spawn(case, steps, True, code)
            results.setdefault(case, {})[code or "this checkout"] = {
                "calls_per_step": got["calls_per_step"], "profiled_share": got["profiled_share"],
                "us_per_step": [], "cpu_us_per_step": []}
        for r in range(rounds):
            for code in (codes if r % 2 == 0 else codes[::-1]):
                got = spawn(case, steps, False, code)
                for key in ("us_per_step", "cpu_us_per_step"):
                    results[case][code or "this checkout"][key].append(got[key])
                print(f"round {r + 1} {case} [{code or 'this checkout'}]: "
                      f"{got['us_per_step']:.1f} µs per env step "
                      f"({got['cpu_us_per_step']:.1f} of CPU)", flush=True)
    return results


def _median(values: list[float]) -> str:
    """`median [each]`, or "-" where none was taken."""
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} [{', '.join(f'{v:.1f}' for v in values)}]"


def markdown(results: dict[str, Any], steps: int, note: str = "") -> str:
    lines = ["# The off-policy loop per env step, outside the update",
             "",
             f"`benchmarks/loop_profile.py` ({time.strftime('%Y-%m-%d')}, {steps:,} env steps a "
             "run, one env, one torch thread, eager, one gradient step in all): Python calls per "
             "env step (cProfile's count) and µs per env step without the profiler (median "
             "[rounds]), the same in CPU time (the process's own: what time-slicing beside other "
             "jobs adds to the first is not in it), then where a profiled step's time goes.",
             *([f"The machine: {note}"] if note else []),
             "",
             "| case | code | calls per env step | µs per env step | CPU µs per env step |",
             "|---|---|---|---|---|"]
    for case, by_code in results.items():
        for code, r in by_code.items():
            lines.append(f"| {case} | {code} | {r['calls_per_step']:.0f} | "
                         f"{_median(r['us_per_step'])} | {_median(r.get('cpu_us_per_step', []))} |")
    lines += ["", "Share of a profiled env step:", "",
              "| case | code | " + " | ".join([*PARTS, NORMALIZERS, "the loop's own lines"]) + " |",
              "|---|---|" + "---|" * (len(PARTS) + 2)]
    for case, by_code in results.items():
        for code, r in by_code.items():
            share = r["profiled_share"]
            lines.append(f"| {case} | {code} | " + " | ".join(
                f"{100 * share.get(p, 0):.0f}%" for p in [*PARTS, NORMALIZERS, "the loop's own lines"]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", nargs="*", default=[],
                        help="other rltrain checkouts to run beside this one")
    parser.add_argument("--out", default=None)
    parser.add_argument("--note", default="",
                        help="what else ran on the machine, said under the table's title")
    args = parser.parse_args()
    results = measure(args.steps, args.rounds, ["", *args.code])
    report("loop_profile", results, markdown(results, args.steps, args.note), args.out)


if __name__ == "__main__":
    main()
