"""Build the members of a seed batch (PPO objects, one per seed) without a Runner; run a
batch and each of its seeds alone, metric by metric.

What the comparison may demand, from the arithmetic: a batch and its single runs sum the same
terms in other orders (stacked `baddbmm` against `addmm`, reductions over `[S, B]` against
`[B]`), so each sum differs by a few ulps of the size of its terms, and the first differences
are about 1e-7 of a metric's scale. Training keeps them there until a threshold is crossed (a
ratio at PPO's clip, an action at its bound, a sample at a sampling boundary, a gradient near
zero that Adam's normalization turns into a step of up to lr); after that they grow about
tenfold every 10-20 updates, from a step that depends on the CPU's kernels. Hence: metrics
within `rel` of max(|value|, 1) (a mean of O(1) terms, such as a policy loss of advantages
normalized to mean 0, rounds at the size of its terms, not of its mean), schedules exactly,
and parameters in norm, relative to how far they moved.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from rltrain.config.compose import compose_train_config
from rltrain.config.registry import get_algo_spec
from rltrain.envs.make import make_env
from rltrain.runner.runner import Runner
from rltrain.seed_batch.rng import SeedStreams
from rltrain.seed_batch.runner import SeedRunner

SCHEDULES = ("learning_rate", "n_updates", "epsilon")
"""Metric names ending so are computed from step counters, not tensors: equal in any order."""

MOVED = 1e-2
"""A tensor's difference may be this fraction of how far it moved: a noise-dominated weight
differs by up to lr per Adam step once a threshold was crossed, while a seed given another
seed's weights, or none copied back, differs by as much as it moved or more."""


def ppo_members(env_id: str, seeds: int, *overrides: str):
    """(members, streams, spec): `seeds` PPO objects built under seeds 0..S-1, and their streams."""
    return members_of("ppo", env_id, seeds, *overrides)


def members_of(algo: str, env_id: str, seeds: int, *overrides: str):
    """(members, streams, spec): `seeds` objects of `algo` (hidden layers [16, 16]) built under
    seeds 0..S-1, and the streams each seed's run is at right after its build."""
    cfg = compose_train_config([f"algo={algo}", f"env={env_id}", "algo.hidden_sizes=[16, 16]",
                                *overrides])
    env = make_env(cfg.env, torch.device("cpu"))
    spec = env.spec
    env.close()
    streams, members = SeedStreams(), []
    for seed in range(seeds):
        torch.manual_seed(seed)
        members.append(get_algo_spec(algo).build(cfg.algo, spec, "cpu"))
        streams.capture()
    return members, streams, spec


def _recorder(runner: Runner, event: str) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    runner.add_callback(event, lambda state: rows.append(dict(state.metrics)))
    return rows


def assert_batch_matches_single_runs(cfg, tmp_path, updates: int, rel: float = 1e-3) -> None:
    """Train `cfg` (num_seeds > 1) as a batch, then each of its seeds alone: `updates` updates
    on both sides from the same initial weights, every logged metric of each update within
    `rel` of max(|value|, 1), the final parameters within `MOVED` of how far they moved (rel 0:
    metrics and parameters bit for bit)."""
    event = "post_iteration" if cfg.algo.name in ("ppo", "a2c") else "post_update"
    batch = SeedRunner(cfg, tmp_path / "batch")
    batched = [_recorder(r, event) for r in batch.runners]
    starts = [_snapshot(r.algo) for r in batch.runners]
    batch.run()
    for k, seed in enumerate(batch.seeds):
        single = Runner(dataclasses.replace(cfg, seed=seed, num_seeds=1), tmp_path / f"single{k}")
        start = _snapshot(single.algo)
        assert_parameters_follow(starts[k], start, start, 0.0, f"seed {seed} at the start")
        alone = _recorder(single, event)
        single.run()
        assert len(alone) == len(batched[k]) == updates
        for update, (mine, theirs) in enumerate(zip(batched[k], alone, strict=True)):
            assert_metrics_match(mine, theirs, rel, f"seed {seed}, update {update}")
        assert_parameters_follow(_snapshot(batch.runners[k].algo), _snapshot(single.algo),
                                 start, MOVED if rel else 0.0, f"seed {seed}")


def assert_metrics_match(mine: dict[str, float], theirs: dict[str, float], rel: float,
                         where: str) -> None:
    """One update's metrics: schedules exactly, the rest within `rel` of max(|theirs|, 1)."""
    assert mine.keys() == theirs.keys(), where
    for name, value in theirs.items():
        if name.startswith("time/") or (math.isnan(value) and math.isnan(mine[name])):
            continue
        bound = 0.0 if name.endswith(SCHEDULES) else rel * max(abs(value), 1.0)
        assert abs(mine[name] - value) <= bound, \
            f"{where}: {name} {mine[name]} vs alone {value} (bound {bound:.1e})"


def assert_parameters_follow(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor],
                             start: dict[str, torch.Tensor], moved: float, where: str) -> None:
    """Each tensor of `mine` within `moved` x ‖theirs − start‖ of `theirs`, in norm (0: equal)."""
    assert mine.keys() == theirs.keys(), where
    for name, value in theirs.items():
        if not moved or not value.is_floating_point():
            assert torch.equal(mine[name], value), f"{where}, {name}: not bit for bit"
            continue
        gap = (mine[name].double() - value.double()).norm().item()
        bound = moved * (value.double() - start[name].double()).norm().item()
        assert gap <= bound, f"{where}, {name}: {gap:.2e} apart, more than {moved} x the " \
                             f"{bound / moved:.2e} it moved"


def _snapshot(algo) -> dict[str, torch.Tensor]:
    """A copy of every network parameter and tensor the algorithm holds, by name (`policy.*`,
    `q_target.*`, `log_alpha`...), from its state dict (optimizer states left out)."""
    out = {}
    for part, value in algo.state_dict().items():
        if isinstance(value, torch.Tensor):
            out[part] = value.detach().clone()
        elif isinstance(value, dict) and "optimizer" not in part and "state" not in value:
            out.update({f"{part}.{k}": v.detach().clone() for k, v in value.items()
                        if isinstance(v, torch.Tensor)})
    return out
