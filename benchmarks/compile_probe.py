"""Milliseconds of one SAC update (batch 256, HalfCheetah's shapes: 17 obs, 6 actions), eager
against the actor's and critics' forwards wrapped in `torch.compile` (mode `default`, and on a
GPU `reduce-overhead`: CUDA graphs), 256x256 and 64x64, on the CPU and, where there is one, the
GPU, in one process. Writes `<out>/compile_probe.json`.

    python benchmarks/compile_probe.py [--out benchmarks/results/gpu] [--updates 300]

Only the forwards are compiled: the whole update (forward, backward and rltrain's `FusedAdam`,
which calls `torch._fused_adam_` itself) does not trace ("mutating a non-functional tensor with
a functional tensor is not allowed", torch 2.13 CPU). Results: benchmarks/results/gpu/compile.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.sac import SAC
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(17,), action_kind="box", action_dim=6, num_envs=1)
MODES = ("eager", "default", "reduce-overhead")


def batch(device: str, n: int = 256) -> TransitionBatch:
    """A fixed random batch of `n` transitions on `device`."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device)

    actions = (torch.rand(n, 6, generator=g) * 2 - 1).to(device)
    return TransitionBatch(randn(n, 17), actions, randn(n), randn(n, 17),
                           torch.zeros(n, device=device))


def update_ms(agent: SAC, b: TransitionBatch, device: str, updates: int) -> float:
    """Mean milliseconds of one update over `updates`, after 30 warm-up updates."""
    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for i in range(30):
        agent.update(b, 1000 + i)
    sync()
    start = time.perf_counter()
    for i in range(updates):
        agent.update(b, 2000 + i)
    sync()
    return (time.perf_counter() - start) / updates * 1e3


def measure(device: str, hidden: list[int], mode: str, updates: int) -> dict[str, Any]:
    """One row: the update's milliseconds and the seconds spent wrapping and warming up."""
    torch.manual_seed(0)
    agent = SAC(SACConfig(hidden_sizes=hidden), SPEC, device)
    start = time.perf_counter()
    if mode != "eager":
        for name in ("actor", "critic", "critic_target"):
            net = getattr(agent, name)
            net.forward = torch.compile(net.forward, mode=mode, dynamic=False)
    row: dict[str, Any] = {"device": device, "hidden": hidden, "mode": mode}
    try:
        row["update_ms"] = round(update_ms(agent, batch(device), device, updates), 3)
        row["setup_s"] = round(time.perf_counter() - start, 1)
    except Exception as exc:  # a backend that cannot compile here: say so, go on
        row["error"] = str(exc).splitlines()[0][:200]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp"))
    parser.add_argument("--updates", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for device in ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]:
        for hidden in ([256, 256], [64, 64]):
            for mode in MODES:
                if device == "cpu" and mode == "reduce-overhead":
                    continue  # CUDA graphs
                rows.append(measure(device, hidden, mode, args.updates))
                print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_probe.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
