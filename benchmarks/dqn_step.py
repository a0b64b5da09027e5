"""Where the DQN row of `equal_work.md` loses to SBX: one gradient step at RL-Zoo's CartPole
shapes (4 -> 256 -> 256 -> 2, batch 64, no double Q), rltrain's compiled update against SBX's
jitted `train()`, each pinned to one core, and rltrain's step taken apart by torch's profiler.

    .venv-sbx/bin/python benchmarks/dqn_step.py [--core 1] [--steps 2000] [--out DIR]

Both sides run in fresh processes on the same core (`os.sched_setaffinity`), one after the
other. SBX's `train(64, 128)` samples all 128 minibatches at once and runs the 128 steps as one
`jax.lax.scan`: one dispatch a burst. rltrain calls its compiled graph once a step. The same
matrix products are timed alone (`torch.mm` at the step's shapes), so the table says how much
of a step is products and how much is everything else.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_io import report  # noqa: E402

OBS, ACTIONS, HIDDEN, BATCH, BURST = 4, 2, 256, 64, 128


def rltrain_step(steps: int, cache: str) -> dict[str, float]:
    """rltrain's DQN update, compiled (cache filled by a first process), ms per step; and the
    profiler's self times per step of the ops that make it."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    from rltrain.algos import compiled, dqn
    from rltrain.algos.configs.dqn import DQNConfig
    from rltrain.types import EnvSpec, TransitionBatch

    torch.manual_seed(0)
    algo = dqn.build(DQNConfig(hidden_sizes=[HIDDEN, HIDDEN], batch_size=BATCH, double_q=False),
                     EnvSpec((OBS,), "discrete", ACTIONS, 1))
    compiled.use(algo, cache)
    g = torch.Generator().manual_seed(1)
    batch = TransitionBatch(torch.randn(BATCH, OBS, generator=g),
                            torch.randint(0, ACTIONS, (BATCH,), generator=g).float(),
                            torch.randn(BATCH, generator=g), torch.randn(BATCH, OBS, generator=g),
                            (torch.rand(BATCH, generator=g) < 0.02).float())
    for i in range(50):
        algo.update(batch, i)
    if algo.graph is None:
        raise SystemExit("the update did not compile")
    t0 = time.perf_counter()
    for i in range(steps):
        algo.update(batch, i)
    out = {"update_ms": (time.perf_counter() - t0) / steps * 1e3}
    calls = 300
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(calls):
            algo.update(batch, i)
    ops: dict[str, float] = {}
    for e in prof.key_averages():
        name = ("matrix products" if e.key in ("aten::mm", "aten::addmm")
                else "inductor's generated code (its kernels and wrapper)"
                if e.key.startswith("## Call CompiledFxGraph")
                else "dynamo and AOT wrappers" if e.key.startswith(
                    ("TorchDynamo", "Torch-Compiled Region", "AOTDispatcher", "Pregraph"))
                else "other aten ops (norms, copies, views)")
        ops[name] = ops.get(name, 0.0) + e.self_cpu_time_total / calls / 1e3
    out["profiled_ms"] = ops
    x, w = torch.randn(BATCH, HIDDEN), torch.randn(HIDDEN, HIDDEN)
    for label, f in (("x @ W.T (nn.Linear's layout)", lambda: torch.mm(x, w.t())),
                     ("x @ W", lambda: torch.mm(x, w))):
        for _ in range(200):
            f()
        t0 = time.perf_counter()
        for _ in range(5000):
            f()
        out[f"mm {BATCH}x{HIDDEN}x{HIDDEN}, {label}, us"] = (time.perf_counter() - t0) / 5000 * 1e6
    return out


def sbx_step(bursts: int) -> dict[str, float]:
    """SBX's DQN `train(64, 128)` (sampling included), ms per gradient step."""
    import gymnasium as gym
    from sbx import DQN

    model = DQN("MlpPolicy", gym.make("CartPole-v1"), batch_size=BATCH, learning_starts=1000,
                train_freq=256, gradient_steps=BURST, policy_kwargs={"net_arch": [HIDDEN, HIDDEN]},
                seed=0, verbose=0)
    model.learn(1500)  # fills the replay past learning_starts; train() jitted
    model.train(BATCH, BURST)
    t0 = time.perf_counter()
    for _ in range(bursts):
        model.train(BATCH, BURST)
    return {"train_ms_per_step": (time.perf_counter() - t0) / (bursts * BURST) * 1e3}


def spawn(side: str, core: int, steps: int, cache: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--one", side, str(core), str(steps), cache],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        side, core, steps, cache = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        os.sched_setaffinity(0, {core})
        print(json.dumps(rltrain_step(steps, cache) if side == "rltrain"
                         else sbx_step(max(1, steps // BURST))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        spawn("rltrain", args.core, 60, cache)  # the compile, into the cache
        ours = spawn("rltrain", args.core, args.steps, cache)
    theirs = spawn("sbx", args.core, args.steps, "")
    ratio = ours["update_ms"] / theirs["train_ms_per_step"]
    lines = ["# One DQN gradient step: rltrain's compiled update against SBX's jitted train()",
             "",
             f"`benchmarks/dqn_step.py` (`.venv-sbx`), both pinned to core {args.core}, "
             f"{time.strftime('%Y-%m-%d')}: RL-Zoo's CartPole shapes ({OBS}-{HIDDEN}-{HIDDEN}-"
             f"{ACTIONS}, batch {BATCH}, no double Q).",
             "",
             "| | ms per gradient step |",
             "|---|---|",
             f"| rltrain, compiled (one graph call a step) | {ours['update_ms']:.3f} |",
             f"| SBX (one `lax.scan` a burst of {BURST}, sampling included) | "
             f"{theirs['train_ms_per_step']:.3f} |",
             f"| rltrain / SBX | {ratio:.2f} |",
             "",
             "rltrain's step under torch's profiler (self time per step; the profiler adds its "
             "own):",
             "",
             "| part | ms |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in sorted(ours["profiled_ms"].items(),
                                                        key=lambda kv: -kv[1])]
    lines += ["", "A matrix product of the step's largest shape alone:", ""]
    lines += [f"- {k[:-4]}: {v:.1f} µs" for k, v in ours.items() if k.startswith("mm ")]
    report("dqn_step", {"rltrain": ours, "sbx": theirs}, "\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
