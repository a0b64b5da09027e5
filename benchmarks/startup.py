"""Start-up times of the `rltrain` command (issue 16), each the median of `--repeat` runs.

    python benchmarks/startup.py               # 5 runs of each
    python benchmarks/startup.py --repeat 9

Four figures, each from a new process started here (the clock starts just before it does):
`rltrain --help`; a refused command line (`rltrain algo.lr=-1`, one error line, exit 2); and for
`rltrain algo=ppo env=CartPole-v1 total_timesteps=512` the time to its first env step and to its
exit. The first step is seen by a hook this script installs in the child (`FIRST_STEP`): it
wraps `GymVecEnv.step` when `rltrain.envs.vec_env` is imported and writes the time of the first
call to a file; rltrain itself is not changed. Targets: --help and the refused command line
<= 0.5 s without importing torch (checked here too), the first env step <= 2 s.

Wall-clock seconds depend on the machine's load (the load average is printed with them); the
CPU seconds the process used (user + system) up to the same point depend on it much less, and
are about what the wall clock shows on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLTRAIN = str(Path(sys.executable).with_name("rltrain"))
RUN = ["algo=ppo", "env=CartPole-v1", "total_timesteps=512"]
TARGETS = {"help": 0.5, "refused": 0.5, "first_step": 2.0}

# run in the child: rltrain.cli.main with the hook, then a line naming torch if it was imported
FIRST_STEP = """
import importlib.abc, importlib.machinery, os, sys, time

class FirstStep(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "rltrain.envs.vec_env":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            step = module.GymVecEnv.step

            def first(self, action):
                module.GymVecEnv.step = step
                cpu = os.times()
                with open(os.environ["RLTRAIN_FIRST_STEP_FILE"], "w") as f:
                    f.write(f"{time.time()!r} {cpu.user + cpu.system!r}")
                return step(self, action)

            module.GymVecEnv.step = first

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, FirstStep())
sys.argv = ["rltrain", *sys.argv[1:]]
from rltrain.cli import main
main()
"""
TORCH_REPORT = """
import atexit, sys
atexit.register(lambda: print("torch imported" if "torch" in sys.modules else "", file=sys.stderr))
sys.argv = ["rltrain", *sys.argv[1:]]
from rltrain.cli import main
main()
"""


def timed(cmd: list[str], cwd: str, expect: int,
          env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds from starting `cmd` to its exit; it must exit with `expect`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(cmd[-3:])}: exit {done.returncode}, expected {expect}\n"
                         f"{done.stderr[-2000:]}")
    return took, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run_once(cwd: str, k: int) -> dict[str, tuple[float, float]]:
    """One (wall, CPU) timing of each figure."""
    times = {"help": timed([RLTRAIN, "--help"], cwd, 0),
             "refused": timed([RLTRAIN, "algo.lr=-1"], cwd, 2)}
    mark = Path(cwd) / f"first_step_{k}"
    env = {**os.environ, "RLTRAIN_FIRST_STEP_FILE": str(mark)}
    start = time.time()
    times["exit"] = timed([sys.executable, "-c", FIRST_STEP, *RUN,
                           f"hydra.run.dir={Path(cwd) / f'run_{k}'}"], cwd, 0, env)
    at, cpu = map(float, mark.read_text().split())
    times["first_step"] = (at - start, cpu)
    return times


def imports_torch(argv: list[str], cwd: str) -> bool:
    """Whether `rltrain <argv>` imports torch (the targets allow none for --help and errors)."""
    done = subprocess.run([sys.executable, "-c", TORCH_REPORT, *argv], cwd=cwd,
                          capture_output=True, text=True)
    return "torch imported" in done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timings of each figure (median)")
    args = parser.parse_args(argv)
    rows = {"help": "rltrain --help", "refused": "rltrain algo.lr=-1 (refused, exit 2)",
            "first_step": "rltrain algo=ppo env=CartPole-v1 total_timesteps=512: 1st step",
            "exit": "  ... the same run: exit"}
    with tempfile.TemporaryDirectory() as cwd:
        load = os.getloadavg()[0]
        runs = [run_once(cwd, k) for k in range(args.repeat)]
        torch_free = {"help": not imports_torch(["--help"], cwd),
                      "refused": not imports_torch(["algo.lr=-1"], cwd)}
    print(f"rltrain start-up, medians of {args.repeat} runs (load average {load:.2f} at the start, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'command':<64} {'wall s':>7} {'min':>6} {'max':>6} {'CPU s':>6}  target")
    for key, label in rows.items():
        values = [r[key][0] for r in runs]
        median = statistics.median(values)
        cpu = statistics.median(r[key][1] for r in runs)
        target = TARGETS.get(key)
        met = target is None or median <= target
        note = "" if target is None else f"<= {target} s {'met' if met else 'MISSED'}"
        if key in torch_free:
            note += ", no torch" if torch_free[key] else ", IMPORTS TORCH"
        print(f"{label:<64} {median:7.2f} {min(values):6.2f} {max(values):6.2f} {cpu:6.2f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
