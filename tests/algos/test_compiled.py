"""The compiled update (`algos/compiled.py`) and the form it traces (`algos/steps.py`
`GraphSteps`): the same math as the eager update, for every algorithm that has one, a single run
and a seed batch; when `compile=auto` turns it on; a compile that fails leaves the run eager.

Most checks run `GraphSteps` without compiling it (what inductor is handed, run by torch op by
op: the same functional calls, `torch.func` gradients and foreach Adam), so they take
milliseconds; one runs the real compile (~20 s), and the slow ones compile every algorithm.
"""

from __future__ import annotations

import logging
import os

import pytest
import torch

from rltrain.algos import compiled
from rltrain.algos.configs.ddpg import DDPGConfig
from rltrain.algos.configs.dqn import DQNConfig
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.configs.qrdqn import QRDQNConfig
from rltrain.algos.configs.sac import SACConfig
from rltrain.algos.configs.td3 import TD3Config
from rltrain.algos.configs.tqc import TQCConfig
from rltrain.algos.ddpg import DDPG
from rltrain.algos.dqn import DQN
from rltrain.algos.optim import adam
from rltrain.algos.ppo import PPO
from rltrain.algos.qrdqn import QRDQN
from rltrain.algos.sac import SAC
from rltrain.algos.steps import EagerSteps, GraphSteps, Trained
from rltrain.algos.td3 import TD3
from rltrain.algos.tqc import TQC
from rltrain.config.compose import compose_train_config
from rltrain.runner.setup import planned_updates
from rltrain.seed_batch.rng import SeedStreams
from rltrain.types import EnvSpec, TransitionBatch

SPEC = EnvSpec(obs_shape=(5,), action_kind="box", action_dim=2, num_envs=1)
DISCRETE = EnvSpec(obs_shape=(5,), action_kind="discrete", action_dim=3, num_envs=1)
ALGOS = {
    "dqn": lambda **kw: DQN(DQNConfig(hidden_sizes=[16, 16], max_grad_norm=0.5, **kw), DISCRETE),
    "dqn_unclipped": lambda **kw: DQN(DQNConfig(hidden_sizes=[16, 16], max_grad_norm=0.0,
                                                double_q=True, **kw), DISCRETE),
    "qrdqn": lambda **kw: QRDQN(QRDQNConfig(hidden_sizes=[16, 16], n_quantiles=5, **kw),
                                DISCRETE),
    "sac": lambda **kw: SAC(SACConfig(hidden_sizes=[16, 16], **kw), SPEC),
    "sac_fixed_alpha": lambda **kw: SAC(SACConfig(hidden_sizes=[16, 16], autotune_alpha=False,
                                                  **kw), SPEC),
    "tqc": lambda **kw: TQC(TQCConfig(hidden_sizes=[16, 16], n_quantiles=5, **kw), SPEC),
    "td3": lambda **kw: TD3(TD3Config(hidden_sizes=[16, 16], **kw), SPEC),
    "ddpg": lambda **kw: DDPG(DDPGConfig(hidden_sizes=[16, 16], **kw), SPEC),
}
UPDATES = 6


def make_batch(i: int, rows: int = 32, seeds: int | None = None,
               discrete: bool = False) -> TransitionBatch:
    g = torch.Generator().manual_seed(i)
    lead = (rows,) if seeds is None else (seeds, rows)
    actions = (torch.randint(0, 3, lead, generator=g).float() if discrete
               else torch.rand(*lead, 2, generator=g) * 2 - 1)
    return TransitionBatch(torch.randn(*lead, 5, generator=g), actions,
                           torch.randn(*lead, generator=g), torch.randn(*lead, 5, generator=g),
                           (torch.rand(*lead, generator=g) < 0.2).float())


def traced_form(algo) -> None:
    """`algo.update` runs its `learn` over `GraphSteps`, uncompiled: what inductor is given."""
    algo.graph = lambda *args: algo.learn(GraphSteps(algo.steps, algo.steps.tensors()), *args)


def build(name: str, seeds: int | None, **overrides):
    """One algorithm (seeds None), or a seed batch of `seeds` stacked, each from seed 0, 1, ..."""
    if seeds is None:
        torch.manual_seed(0)
        return ALGOS[name](**overrides)
    streams, members = SeedStreams(torch.device("cpu")), []
    for k in range(seeds):
        torch.manual_seed(k)
        members.append(ALGOS[name](**overrides))
        streams.capture()
    return type(members[0]).stack(members, streams)


def run(algo, seeds: int | None) -> list:
    metrics, discrete = [], isinstance(algo, DQN)
    for i in range(UPDATES):
        torch.manual_seed(100 + i)
        metrics.append(algo.update(make_batch(i, seeds=seeds, discrete=discrete), i))
    return metrics


def assert_same_training(eager, other, eager_metrics, other_metrics) -> None:
    """Every metric of every update, every tensor of the state (networks, targets, Adam's
    moments and counts): equal within float rounding (Adam's arithmetic in another order)."""
    for a, b in zip(eager_metrics, other_metrics, strict=True):
        rows_a, rows_b = (a, b) if isinstance(a, list) else ([a], [b])
        for ra, rb in zip(rows_a, rows_b, strict=True):
            assert ra.keys() == rb.keys()
            for key in ra:
                assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-6), key
    flat_a = torch.utils._pytree.tree_leaves(eager.state_dict())
    flat_b = torch.utils._pytree.tree_leaves(other.state_dict())
    assert len(flat_a) == len(flat_b)
    for a, b in zip(flat_a, flat_b, strict=True):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        else:
            assert a == b


@pytest.mark.parametrize("seeds", [None, 3], ids=["single", "batch_of_3"])
@pytest.mark.parametrize("name", list(ALGOS))
def test_the_traced_form_trains_as_the_eager_update(name, seeds):
    """TD3's actor every 2nd update (both graphs); a decaying rate (a tensor in the graph)."""
    kw = {"policy_delay": 2} if name == "td3" else {}
    if name.startswith("dqn"):  # a target copy (outside the graph) within the updates
        kw = {"target_update_interval": 3, "lr_decay_steps": 4, "lr_final": 1e-5}
    eager, traced = build(name, seeds, **kw), build(name, seeds, **kw)
    traced_form(traced)
    assert_same_training(eager, traced, run(eager, seeds), run(traced, seeds))


def test_a_stale_draw_would_show():
    """The comparison above can fail: one update's noise from another stream breaks it."""
    eager, traced = build("sac", None), build("sac", None)
    traced_form(traced)
    metrics = run(eager, None)
    torch.manual_seed(7)  # the traced run's draws from another stream
    other = []
    for i in range(UPDATES):
        other.append(traced.update(make_batch(i), i))
    with pytest.raises(AssertionError):
        assert_same_training(eager, traced, metrics, other)


def test_the_compiled_update_trains_as_the_eager_one(tmp_path):
    """The real compile (inductor, a C++ build): DDPG, the smallest graph."""
    eager, fast = build("ddpg", None), build("ddpg", None)
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    compiled.use(fast, tmp_path / "cache")
    metrics = run(fast, None)
    assert fast.graph is not None, "the update fell back to eager"
    assert_same_training(eager, fast, run(eager, None), metrics)
    assert any((tmp_path / "cache").iterdir())  # inductor's code, for the next run
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == before  # the caller's, given back


class Scaler:
    """The least an algorithm `CompiledLearn` compiles: `learn(steps, x, double)` reads one
    tensor of its own (`steps.tensors()`) and takes a Python flag."""

    def __init__(self):
        self.graph = None
        self.steps = self
        self.weight = torch.tensor(3.0)

    def tensors(self):
        return {"weight": self.weight}

    def learn(self, steps, x, double):
        w = steps.tensors["weight"]
        return x * w * 2 if double else x * w


def test_a_compiled_update_takes_a_new_graph_for_each_new_signature(tmp_path):
    """Calls of a signature seen before skip dynamo's guards; a new flag value or a new shape
    must still get its own graph, not the first one's (the unsafe mode's failure: silently
    the wrong graph), and the algorithm's own tensors are read as they are now."""
    algo = Scaler()
    compiled.use(algo, tmp_path / "cache")
    ones = torch.ones(3)
    # every other element of a longer tensor: ones' shape, other strides (the graph was made
    # reading contiguous memory, and it no longer checks sizes and strides itself)
    strided = torch.arange(6.0)[::2]
    calls = [(ones, False, 3.0), (ones, False, 3.0), (ones, True, 6.0), (ones, False, 3.0),
             (torch.ones(4), False, 3.0), (ones, True, 6.0)]
    for x, double, value in calls:
        assert torch.equal(algo.graph(x, double), torch.full_like(x, value)), (x.shape, double)
    for _ in range(2):
        assert torch.equal(algo.graph(strided, False), torch.tensor([0.0, 6.0, 12.0]))
    algo.weight.fill_(5.0)  # changed in place, as an optimizer step changes parameters
    assert torch.equal(algo.graph(ones, True), torch.full((3,), 10.0))
    assert algo.graph is not None and len(algo.graph.seen) == 4
    # the three compiles' seconds, once, for the progress to leave out of its speed
    assert compiled.take_compile_seconds(algo) > 0.0
    assert compiled.take_compile_seconds(algo) == 0.0
    assert compiled.take_compile_seconds(build("sac", None)) == 0.0  # eager


def test_runs_after_the_eighth_in_one_process_still_compile(tmp_path):
    """Dynamo keeps graphs on a function's code object, at most 8: with one shared function
    the graphs of a sweep's or a test suite's earlier runs (other shapes, other algorithms)
    used the room up, and later runs fell back to eager."""
    for k in range(10):
        algo = Scaler()
        compiled.use(algo, tmp_path / "cache")
        x = torch.ones(k + 2)  # a shape of its own: a graph of its own
        assert torch.equal(algo.graph(x, False), torch.full_like(x, 3.0))
        assert algo.graph is not None, f"run {k + 1} fell back to eager"


@pytest.mark.parametrize("a,b", [
    ((torch.ones(3), True), (torch.ones(3), False)),
    ((torch.ones(3),), (torch.ones(4),)),
    ((torch.ones(3),), (torch.ones(6)[::2],)),
    ((torch.ones(3),), (torch.ones(3, dtype=torch.float64),)),
    ((torch.ones(3),), (torch.ones(3, requires_grad=True),)),
    ((TransitionBatch(*[torch.ones(2)] * 5),), (TransitionBatch(*[torch.ones(2)] * 4,
                                                                torch.ones(3)),)),
    (({"a": torch.ones(2)},), ({"b": torch.ones(2)},)),
    ((None,), ((),)),
], ids=["flag", "shape", "strides", "dtype", "grad", "batch_field", "dict_key", "none_or_empty"])
def test_the_signature_tells_apart_what_a_graph_is_made_for(a, b):
    assert compiled.signature(a) != compiled.signature(b)
    assert compiled.signature(a) == compiled.signature(tuple(
        x.clone() if isinstance(x, torch.Tensor) else x for x in a))


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [None, 2], ids=["single", "batch_of_2"])
@pytest.mark.parametrize("name", ["sac", "tqc", "td3", "dqn", "qrdqn"])
def test_every_compiled_update_trains_as_its_eager_one(tmp_path, name, seeds):
    kw = {"policy_delay": 2} if name == "td3" else {}
    eager, fast = build(name, seeds, **kw), build(name, seeds, **kw)
    compiled.use(fast, tmp_path / "cache")
    metrics = run(fast, seeds)
    assert fast.graph is not None, "the update fell back to eager"
    assert_same_training(eager, fast, run(eager, seeds), metrics)


def test_a_compile_that_fails_says_so_and_trains_eagerly(monkeypatch, caplog):
    def broken(fn, **_):
        def call(*args):
            raise RuntimeError("inductor: no C++ compiler found\nmore detail")
        return call
    monkeypatch.setattr(torch, "compile", broken)
    eager, fast = build("sac", None), build("sac", None)
    compiled.use(fast)
    with caplog.at_level(logging.WARNING, logger="rltrain"):
        metrics = run(fast, None)
    assert fast.graph is None
    assert_same_training(eager, fast, run(eager, None), metrics)
    lines = [r.getMessage() for r in caplog.records if "compile" in r.getMessage()]
    assert lines == ["compile: SAC's update did not compile (RuntimeError: inductor: no C++ "
                     "compiler found); training eagerly"]


CPU = torch.device("cpu")


@pytest.mark.parametrize("mode,planned,on,says", [
    ("auto", compiled.AUTO_MIN_UPDATES, True, "50,000 planned gradient steps"),
    ("auto", compiled.AUTO_MIN_UPDATES - 1, False, "49,999 planned gradient steps, fewer than"),
    ("true", 10, True, "compile=true"),
    ("false", 10**9, False, "compile=false"),
])
def test_auto_compiles_where_the_run_is_long_enough(mode, planned, on, says):
    assert compiled.choose(mode, build("sac", None), CPU, planned)[0] is on
    assert compiled.choose(mode, build("sac", None), CPU, planned)[1].startswith(says)


def test_auto_follows_each_algorithms_break_even():
    dqn = build("dqn", None)
    assert compiled.choose("auto", dqn, CPU, 99_999)[0] is False
    assert compiled.choose("auto", dqn, CPU, 100_000)[0] is True
    assert compiled.choose("auto", build("tqc", None), CPU, 10_000)[0] is True
    dqn.COMPILE_PAYS_AFTER = None  # an update that never pays back its compile here
    assert compiled.choose("auto", dqn, CPU, 10**9) == (False, (
        "compile=auto: DQN's update gains too little here to pay back a compile; compile=true "
        "compiles it"))
    assert compiled.choose("true", dqn, CPU, 10)[0] is True


def test_what_cannot_compile_runs_eagerly_and_says_why(monkeypatch):
    ppo = PPO(PPOConfig(hidden_sizes=[8]), EnvSpec((3,), "discrete", 2, 1))
    assert compiled.choose("true", ppo, CPU, 10**6) == (False, "PPO has no compiled update yet")
    sac = build("sac", None)
    assert compiled.choose("true", sac, torch.device("mps"), 10**6) == (
        False, "torch.compile does not serve device mps")
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    assert compiled.choose("auto", sac, CPU, 10**6)[1].startswith("no C++ compiler")


@pytest.mark.parametrize("overrides,planned", [
    (["algo=sac", "env=Pendulum-v1", "total_timesteps=20000", "algo.learning_starts=1000"],
     19_000),
    (["algo=sac", "env=Pendulum-v1", "total_timesteps=20000", "algo.learning_starts=1000",
      "algo.train_freq=4", "algo.gradient_steps=2", "env.num_envs=2"], 19_000 // 2 // 4 * 2),
    (["algo=ppo", "env=Pendulum-v1"], 0),
])
def test_planned_updates_count_the_runs_gradient_steps(overrides, planned):
    assert planned_updates(compose_train_config(overrides)) == planned


def test_compile_takes_auto_true_or_false_and_refuses_the_rest():
    assert compose_train_config(["algo=sac", "compile=false"]).compile == "false"
    assert compose_train_config(["algo=sac", "compile=True"]).compile == "true"
    assert compose_train_config(["algo=sac"]).compile == "auto"
    with pytest.raises(Exception, match="compile='sometimes': choose auto, true or false"):
        compose_train_config(["algo=sac", "compile=sometimes"])


def test_both_forms_blend_parameters_and_copy_buffers_in_a_target_update():
    """`polyak`: θ' ← τ θ + (1 − τ) θ' on parameters; buffers (running statistics) copied."""
    def net(value: float) -> torch.nn.Module:
        module = torch.nn.Linear(2, 1)
        torch.nn.init.constant_(module.weight, value)
        module.register_buffer("seen", torch.tensor([value]))
        return module

    for form in ("eager", "graph"):
        source, target = net(1.0), net(0.0)
        steps = EagerSteps({"critic": Trained(source, adam(source.parameters(), 1e-3))},
                           {"critic_target": target})
        if form == "graph":
            steps = GraphSteps(steps, steps.tensors())
        steps.polyak("critic_target", "critic", 0.25)
        assert torch.allclose(target.weight, torch.full((1, 2), 0.25)), form
        assert target.seen.item() == 1.0, form


def test_the_traced_form_takes_encoders_as_the_eager_update():
    """Networks with observation encoders run through `functional_call` alike: SAC on a Dict
    observation (a vector entry and a categorical one, HER's shape of input), DQN on stacked
    uint8 frames (the Nature CNN)."""
    from rltrain.types import ObsEntry

    goal = EnvSpec((), "box", 2, 1, obs_entries=(ObsEntry("observation", (4,)),
                                                 ObsEntry("goal", (2,), obs_nvec=(3, 3))))
    frames = EnvSpec((2, 36, 36), "discrete", 3, 1, pixels=True, frame_stack=2)
    g = torch.Generator().manual_seed(0)

    def dict_obs() -> dict[str, torch.Tensor]:
        return {"observation": torch.randn(16, 4, generator=g),
                "goal": torch.randint(0, 3, (16, 2), generator=g)}

    def pixels() -> torch.Tensor:
        return torch.randint(0, 256, (16, 2, 36, 36), generator=g, dtype=torch.uint8)

    cases = [
        (lambda: SAC(SACConfig(hidden_sizes=[16]), goal), dict_obs,
         lambda: torch.rand(16, 2, generator=g) * 2 - 1),
        (lambda: DQN(DQNConfig(hidden_sizes=[16]), frames), pixels,
         lambda: torch.randint(0, 3, (16,), generator=g).float()),
    ]
    for make, obs, actions in cases:
        torch.manual_seed(0)
        eager = make()
        torch.manual_seed(0)
        traced = make()
        traced_form(traced)
        batches = [TransitionBatch(obs(), actions(), torch.randn(16, generator=g), obs(),
                                   torch.zeros(16)) for _ in range(3)]
        metrics = {}
        for name, algo in (("eager", eager), ("traced", traced)):
            rows = []
            for i, batch in enumerate(batches):
                torch.manual_seed(50 + i)
                rows.append(algo.update(batch, i))
            metrics[name] = rows
        assert_same_training(eager, traced, metrics["eager"], metrics["traced"])
