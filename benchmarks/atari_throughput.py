"""Atari throughput: env steps/s of rltrain's PPO and DQN (with their Atari preprocessing) against
SB3's (AtariWrapper + VecFrameStack(4), RL-Zoo's `atari` settings), and replay bytes per transition.

    python benchmarks/atari_throughput.py                       # both sides, PPO and DQN, Breakout
    python benchmarks/atari_throughput.py --sides sb3 --steps 2048 --env ALE/Pong-v5

Each side trains for a short fixed number of agent steps (updates included) on the same ALE id;
the rate is taken between the first progress mark after `--warmup` steps and the last one, so
construction, the first compiles/allocations and the final evaluation stay off the clock. DQN
starts learning after `--learning-starts` steps on both sides (RL-Zoo's 100k would only time
random actions) and uses a `--buffer` transition replay (bytes per transition do not depend on
the capacity; RL-Zoo's 100k frames x 2 copies would need GBs). Writes
benchmarks/results/atari_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

ALGOS = ("ppo", "dqn")
SIDES = ("rltrain", "sb3")


def tensor_bytes(obj: Any) -> int:
    """Bytes of the torch tensors and numpy arrays held directly in `obj`'s attributes."""
    import numpy as np
    import torch

    total = 0
    for value in vars(obj).values():
        if isinstance(value, torch.Tensor):
            total += value.element_size() * value.nelement()
        elif isinstance(value, np.ndarray):
            total += value.nbytes
        elif isinstance(value, dict):  # dict observation storages
            total += sum(v.nbytes for v in value.values() if isinstance(v, np.ndarray))
    return total


def rate(marks: list[tuple[int, float]], warmup: int) -> float:
    """Steps/s between the first mark at or past `warmup` steps and the last mark."""
    kept = [m for m in marks if m[0] >= warmup] or marks
    (s0, t0), (s1, t1) = kept[0], marks[-1]
    return (s1 - s0) / (t1 - t0) if t1 > t0 and s1 > s0 else float("nan")


def run_rltrain(algo: str, env: str, steps: int, args: argparse.Namespace) -> dict[str, Any]:
    """rltrain with the `<algo>_atari` preset, `steps` agent steps; steps/s and replay bytes."""
    import tempfile

    from rltrain.config.compose import compose_train_config
    from rltrain.runner.runner import Runner

    ov = [f"algo={algo}", f"env.id={env}", f"tuned={algo}_atari", f"seed={args.seed}",
          f"total_timesteps={steps}", "eval.freq=0", "eval.episodes=1", "eval.num_envs=1",
          "checkpoint.freq=0", "progress=off", "logger=none", f"torch_threads={args.threads}",
          f"device={args.device}"]
    if algo == "dqn":
        ov += [f"algo.learning_starts={args.learning_starts}", f"algo.buffer_size={args.buffer}"]
    cfg = compose_train_config(ov)
    marks: list[tuple[int, float]] = []
    replay: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(cfg, Path(tmp) / "run")

        def mark(state: Any) -> None:
            marks.append((state.global_step, time.perf_counter()))
            buf = getattr(runner.ctx, "replay", None)
            if buf is not None and not replay:
                replay["bytes_per_transition"] = tensor_bytes(buf) / cfg.algo.buffer_size

        runner.add_callback("post_iteration", mark)
        runner.run()
    return {"sps": rate(marks, args.warmup), "steps": marks[-1][0] if marks else 0,
            "num_envs": cfg.env.num_envs, **replay}


def run_sb3(algo: str, env: str, steps: int, args: argparse.Namespace) -> dict[str, Any]:
    """SB3 with RL-Zoo's `atari` entry (sb3_side.RL_ZOO), `steps` agent steps."""
    import torch
    from sb3_side import RL_ZOO, make_envs, model_kwargs, require_sb3
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import BaseCallback

    require_sb3()
    torch.set_num_threads(args.threads)
    hp = dict(RL_ZOO[(algo, "ALE/Breakout-v5")])  # RL-Zoo's `atari` entry holds for every game
    if algo == "dqn":
        hp.update(learning_starts=args.learning_starts, buffer_size=args.buffer)
    venv = make_envs(env, hp, hp.get("n_envs", 1), args.seed, training=True)
    model = {"ppo": PPO, "dqn": DQN}[algo](env=venv, seed=args.seed, verbose=0, device=args.device,
                                           **model_kwargs(hp, None))
    marks: list[tuple[int, float]] = []

    class Mark(BaseCallback):
        def _on_step(self) -> bool:
            if algo == "dqn" or self.num_timesteps % (hp.get("n_envs", 1) * hp["n_steps"]) == 0:
                marks.append((self.num_timesteps, time.perf_counter()))
            return True

    model.learn(total_timesteps=steps, callback=Mark())
    out: dict[str, Any] = {"sps": rate(marks, args.warmup), "steps": int(model.num_timesteps),
                           "num_envs": hp.get("n_envs", 1)}
    if algo == "dqn":
        out["bytes_per_transition"] = tensor_bytes(model.replay_buffer) / args.buffer
    venv.close()
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Atari throughput on {result['env']} ({result['machine']}, {result['date']}): agent "
             f"steps/s while training (x4 for frames/s), {result['steps']} steps per run.", "",
             "| algo | rltrain steps/s | SB3 steps/s | ratio rltrain/SB3 | rltrain replay B/transition "
             "| SB3 replay B/transition |", "|---|---|---|---|---|---|"]
    for algo, row in result["rows"].items():
        ours, theirs = row.get("rltrain", {}), row.get("sb3", {})

        def cell(side: dict, key: str, fmt: str) -> str:
            return format(side[key], fmt) if key in side else "missing"

        ratio = (f"{ours['sps'] / theirs['sps']:.2f}" if "sps" in ours and "sps" in theirs
                 else "missing")
        replay = algo == "dqn"
        lines.append(f"| {algo} | {cell(ours, 'sps', '.0f')} | {cell(theirs, 'sps', '.0f')} | "
                     f"{ratio} | {cell(ours, 'bytes_per_transition', ',.0f') if replay else '-'} | "
                     f"{cell(theirs, 'bytes_per_transition', ',.0f') if replay else '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Breakout-v5")
    parser.add_argument("--algos", nargs="*", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--sides", nargs="*", default=list(SIDES), choices=SIDES)
    parser.add_argument("--steps", type=int, default=5120, help="agent steps per run")
    parser.add_argument("--warmup", type=int, default=1024, help="steps before the clock starts")
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--buffer", type=int, default=2000, help="DQN replay capacity")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    import datetime

    result: dict[str, Any] = {"env": args.env, "steps": args.steps, "date":
                              datetime.date.today().isoformat(),
                              "machine": f"{platform.machine()}, device {args.device}, "
                                         f"{args.threads} torch thread(s)", "rows": {}}
    out = Path(args.out)
    previous = out / "atari_throughput.json"
    if previous.exists():  # runs of the other side or algo, kept when they match this setup
        old = json.loads(previous.read_text())
        if (old.get("env"), old.get("steps"), old.get("machine")) == (
                result["env"], result["steps"], result["machine"]):
            result["rows"] = old.get("rows", {})
    for algo in args.algos:
        for side in args.sides:
            run = (run_rltrain if side == "rltrain" else run_sb3)(algo, args.env, args.steps, args)
            result["rows"].setdefault(algo, {})[side] = run
            print(f"{algo} {side}: {run}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "atari_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "atari_throughput.md").write_text(markdown(result) + "\n")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
