"""GPU throughput: PPO on the native torch CartPole with thousands of envs, end to end.

    python benchmarks/gpu.py                                  # 4096 envs on cuda, CPU baseline
    python benchmarks/gpu.py --num-envs 1024 --total 5e6 --device cpu --baseline-total 0

Trains through the `Runner` exactly as `rltrain algo=ppo env=CartPole-v1 env.backend=torch
device=cuda env.num_envs=4096 ...` does, and reports end-to-end env steps/s (collection +
GAE + update + logging; evaluation time off the clock) and the eval curve, so the figure comes
with the evidence that the policy still solves the task. The same run on the CPU
(`--baseline-total` steps, torch's default threads) is the baseline of the printed ratio.
Writes gpu.json/.md to `--out` (benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rltrain_side  # noqa: E402


def overrides(args: argparse.Namespace) -> list[str]:
    """The command-line overrides of the run."""
    n = args.num_envs
    return [f"device={args.device}", "env.backend=torch", f"env.num_envs={n}",
            f"algo.n_steps={args.n_steps}", f"algo.batch_size={n * args.n_steps // args.minibatches}",
            f"algo.n_epochs={args.epochs}", f"algo.lr={args.lr}", "algo.gamma=0.99",
            "algo.gae_lambda=0.95", "algo.anneal_lr=true", f"total_timesteps={int(args.total)}",
            f"eval.freq={int(args.eval_every)}", "eval.episodes=16", "eval.num_envs=16",
            "logger.log_freq=1000000"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train once; returns steps/s, the eval curve and the device name."""
    import torch

    ov = overrides(args)
    cfg = rltrain_side.compose("ppo", "CartPole-v1", args.seed, ov)
    out = rltrain_side.timed_run(cfg)
    steps, seconds, curve = out["runner"].state.global_step, out["train_seconds"], out["curve"]
    device = torch.cuda.get_device_name() if cfg.device.startswith("cuda") else "cpu"
    return {"device": device, "overrides": ov, "steps": steps, "train_seconds": seconds,
            "sps": steps / seconds, "final_return": out["final"]["mean_reward"], "curve": curve,
            "first_475": next((c for c in curve if c[2] >= 475), None),
            "timer": dict(out["runner"].timer.totals)}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, train, print and write the result."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--n-steps", type=int, default=16)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--total", type=float, default=2e7)
    p.add_argument("--eval-every", type=float, default=1e6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline-total", type=float, default=1e6,
                   help="steps of the same run on the CPU (0: no baseline)")
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args(argv)
    logging.disable(logging.INFO)
    result = run(args)
    report(result)
    if args.baseline_total and args.device != "cpu":
        base = run(argparse.Namespace(**{**vars(args), "device": "cpu",
                                         "total": args.baseline_total}))
        report(base)
        result["cpu_baseline"] = base
        print(f"ratio {args.device}/cpu: {result['sps'] / base['sps']:.1f}x env steps/s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "gpu.md").write_text(markdown(result, args) + "\n")


def report(result: dict[str, Any]) -> None:
    """Print one run's rate, sections and eval curve."""
    print(f"{result['device']}: {result['sps']:,.0f} env steps/s end to end "
          f"({result['steps']:,} steps in {result['train_seconds']:.1f} s, evals off the clock); "
          f"final eval {result['final_return']:.1f}; first eval >= 475: {result['first_475']}")
    print("sections (s):", {k: round(v, 2) for k, v in result["timer"].items()})
    print("curve (step, s, return):", [(s, round(t, 2), round(r, 1)) for s, t, r in result["curve"]])


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    """The results table: the device run and its CPU baseline."""
    import datetime

    rows = [result, *([result["cpu_baseline"]] if "cpu_baseline" in result else [])]
    lines = [f"PPO on the native torch CartPole, {args.num_envs} envs x {args.n_steps} steps per "
             f"rollout ({datetime.date.today().isoformat()}): end-to-end env steps/s, evaluation "
             "off the clock.", "",
             "| device | env steps | seconds | env steps/s | final eval | first eval >= 475 (step, s) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        first = f"{r['first_475'][0]:,}, {r['first_475'][1]:.1f}" if r["first_475"] else "none"
        lines.append(f"| {r['device']} | {r['steps']:,} | {r['train_seconds']:.1f} | "
                     f"{r['sps']:,.0f} | {r['final_return']:.1f} | {first} |")
    if "cpu_baseline" in result:
        lines += ["", f"Ratio: {result['sps'] / result['cpu_baseline']['sps']:.1f}x the CPU's "
                  "env steps/s."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
