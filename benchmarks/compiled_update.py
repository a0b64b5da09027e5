"""The compiled update (`rltrain/algos/compiled.py`) against the eager one, per gradient step, and
what its first compile costs, cold (an empty cache folder) and warm (a second process on the
same folder): the break-even in gradient steps, which `compile=auto` follows.

Each case is an algorithm at a tuned preset's shapes (obs and action sizes of its task, hidden
sizes, batch), on a synthetic batch; every measurement runs in a fresh process (dynamo's
in-memory caches would hide the cold cost), the forms interleaved round by round.

    python benchmarks/compiled_update.py [--rounds 2] [--steps 600] [--cases sac:hopper ...]
        [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# name -> (algorithm, obs size, action size, hidden sizes, batch, extra config fields, preset)
CASES = {
    "sac:pendulum": ("sac", 3, 1, [64, 64], 256, {}, "sac_pendulum"),
    "sac:hopper": ("sac", 11, 3, [128, 128], 256, {}, "sac_hopper"),
    "sac:256x256": ("sac", 17, 6, [256, 256], 256, {}, "SB3's default network, HalfCheetah sizes"),
    "tqc:hopper": ("tqc", 11, 3, [256, 256], 256, {"top_quantiles_to_drop_per_net": 5},
                   "tqc_hopper"),
    "td3:pendulum": ("td3", 3, 1, [64, 64], 256, {}, "td3_pendulum"),
    "td3:hopper": ("td3", 11, 3, [400, 300], 256, {}, "td3_hopper"),
    "ddpg:pendulum": ("ddpg", 3, 1, [64, 64], 256, {}, "ddpg_pendulum"),
    "dqn:cartpole": ("dqn", 4, 2, [256, 256], 64, {}, "dqn_cartpole"),
    "qrdqn:cartpole": ("qrdqn", 4, 2, [256, 256], 64, {}, "qrdqn_cartpole"),
}
DISCRETE = ("dqn", "qrdqn")


def one(case: str, form: str, steps: int, cache: str) -> dict[str, float]:
    """In this process: build the case's algorithm, time its first update (the compile, for the
    compiled form) and then `steps` updates; seconds and ms per update."""
    import importlib
    import os

    import torch

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)  # as a run trains (`flush_denormal=true`, the default)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    from rltrain.algos import compiled
    from rltrain.types import EnvSpec, TransitionBatch

    name, obs, act, hidden, rows, extra, _ = CASES[case]
    module = importlib.import_module(f"rltrain.algos.{name}")
    config = importlib.import_module(f"rltrain.algos.configs.{name}")
    cfg_class = next(getattr(config, n) for n in dir(config)
                     if n.lower() == f"{name}config")
    torch.manual_seed(0)
    kind = "discrete" if name in DISCRETE else "box"
    algo = module.build(cfg_class(hidden_sizes=hidden, batch_size=rows, **extra),
                        EnvSpec((obs,), kind, act, 1))
    if form == "compiled":
        compiled.use(algo, cache)
    g = torch.Generator().manual_seed(1)
    actions = (torch.randint(0, act, (rows,), generator=g).float() if kind == "discrete"
               else torch.rand(rows, act, generator=g) * 2 - 1)
    batch = TransitionBatch(torch.randn(rows, obs, generator=g), actions,
                            torch.randn(rows, generator=g), torch.randn(rows, obs, generator=g),
                            (torch.rand(rows, generator=g) < 0.02).float())
    t0 = time.perf_counter()
    for i in range(4):  # every graph a run meets (TD3's delayed actor: with and without)
        algo.update(batch, i)
    first = time.perf_counter() - t0
    if form == "compiled" and algo.graph is None:
        raise SystemExit("the update did not compile")
    for i in range(50):
        algo.update(batch, i)
    t0 = time.perf_counter()
    for i in range(steps):
        algo.update(batch, i)
    return {"first_s": first, "ms": (time.perf_counter() - t0) / steps * 1e3}


def spawn(case: str, form: str, steps: int, cache: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--one", case, form, str(steps), cache],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(cases: list[str], rounds: int, steps: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    for r in range(rounds):
        for case in cases:
            with tempfile.TemporaryDirectory() as cache:
                eager = spawn(case, "eager", steps, cache)
                cold = spawn(case, "compiled", steps, cache)
                warm = spawn(case, "compiled", steps, cache)
            row = results.setdefault(case, {})
            for key, value in (("eager_ms", eager["ms"]), ("compiled_ms", cold["ms"]),
                               ("compiled_ms", warm["ms"]), ("cold_s", cold["first_s"]),
                               ("warm_s", warm["first_s"]), ("eager_first_s", eager["first_s"])):
                row.setdefault(key, []).append(value)
            print(f"round {r + 1} {case}: eager {eager['ms']:.2f} ms, compiled {cold['ms']:.2f} / "
                  f"{warm['ms']:.2f} ms, compile {cold['first_s']:.1f} s cold, "
                  f"{warm['first_s']:.1f} s warm", flush=True)
    return results


def report(results: dict[str, dict[str, list[float]]], rounds: int, steps: int) -> str:
    lines = [
        "# The compiled update against the eager one",
        "",
        f"`python benchmarks/compiled_update.py` ({rounds} round{'s' if rounds > 1 else ''}, {steps} timed updates after 54 "
        "untimed, one thread, a synthetic batch; each form in a fresh process, interleaved). "
        "Medians. *compile*: the first updates' seconds, less the eager form's; *break-even*: "
        "the gradient steps whose saving pays the compile back.",
        "",
        "| case | shapes | eager ms | compiled ms | ratio | compile cold s | compile warm s | "
        "break-even cold | break-even warm |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for case, row in results.items():
        name, obs, act, hidden, rows, _, preset = CASES[case]
        med = {k: statistics.median(v) for k, v in row.items()}
        saved = (med["eager_ms"] - med["compiled_ms"]) / 1e3
        cold = max(0.0, med["cold_s"] - med["eager_first_s"])
        warm = max(0.0, med["warm_s"] - med["eager_first_s"])
        even_cold, even_warm = (f"{s / saved:,.0f}" if saved > 0 else "never"
                                for s in (cold, warm))
        lines.append(
            f"| {case} ({preset}) | obs {obs}, act {act}, {'x'.join(map(str, hidden))}, batch "
            f"{rows} | {med['eager_ms']:.2f} | {med['compiled_ms']:.2f} | "
            f"{med['compiled_ms'] / med['eager_ms']:.2f} | {cold:.1f} | {warm:.1f} | "
            f"{even_cold} | {even_warm} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        case, form, steps, cache = sys.argv[2:6]
        print(json.dumps(one(case, form, int(steps), cache)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = measure(args.cases, args.rounds, args.steps)
    if args.out:  # the cases run now replace theirs; the others are kept
        saved = Path(args.out, "compiled_update.json")
        results = {**(json.loads(saved.read_text()) if saved.exists() else {}), **results}
        saved.write_text(json.dumps(results, indent=1) + "\n")
    text = report(results, args.rounds, args.steps)
    print(text)
    if args.out:
        Path(args.out, "compiled_update.md").write_text(text)


if __name__ == "__main__":
    main()
