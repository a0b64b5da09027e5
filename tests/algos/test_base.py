"""Shared algorithm pieces: the config bases, the one learning-rate schedule, optimizers built on
first use, and the rules that algorithm files stand alone and config modules import no torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from rltrain.algos.base import on_policy_lr, scheduled_lr
from rltrain.algos.configs.a2c import A2CConfig
from rltrain.algos.configs.base import OnPolicyConfig
from rltrain.algos.configs.ppo import PPOConfig
from rltrain.algos.optim import LazyOptimizer, adam
from rltrain.errors import UserError

ALGOS_DIR = Path(__file__).resolve().parents[2] / "rltrain" / "algos"


def test_scheduled_lr_is_linear_from_lr_to_lr_final_and_clamped():
    assert scheduled_lr(1e-2, 1e-3, 1.0) == pytest.approx(1e-2)
    assert scheduled_lr(1e-2, 1e-3, 0.5) == pytest.approx(5.5e-3)
    assert scheduled_lr(1e-2, 1e-3, 0.0) == pytest.approx(1e-3)
    assert scheduled_lr(1e-2, 1e-3, -6.0) == pytest.approx(1e-3)
    assert scheduled_lr(1e-2, 1e-3, 2.0) == pytest.approx(1e-2)


def test_annealing_to_zero_is_exactly_lr_times_the_remaining_fraction():
    assert scheduled_lr(1e-3, 0.0, 0.3) == 1e-3 * 0.3


def test_on_policy_lr_anneals_to_zero_only_when_asked():
    assert on_policy_lr(PPOConfig(lr=1e-3, anneal_lr=True), 0.25) == pytest.approx(2.5e-4)
    assert on_policy_lr(PPOConfig(lr=1e-3, anneal_lr=True), 0.0) == 0.0
    assert on_policy_lr(PPOConfig(lr=1e-3), 0.25) == 1e-3


def test_on_policy_algorithms_keep_their_own_rollout_defaults():
    assert (PPOConfig().n_steps, PPOConfig().gae_lambda) == (2048, 0.95)
    assert (A2CConfig().n_steps, A2CConfig().gae_lambda) == (5, 1.0)
    assert issubclass(PPOConfig, OnPolicyConfig) and issubclass(A2CConfig, OnPolicyConfig)


@pytest.mark.parametrize("changes, message", [
    ({"n_steps": 0}, "algo.n_steps=0 must be > 0"),
    ({"gae_lambda": 1.5}, r"algo.gae_lambda=1.5 must be in \[0, 1\]"),
    ({"log_std_min": 1.0, "log_std_max": 1.0}, "algo.log_std_min=1.0 must be < algo.log_std_max"),
    ({"log_std_max": float("nan")}, "algo.log_std_max=nan must be a finite number"),
])
@pytest.mark.parametrize("config", [lambda **c: PPOConfig(batch_size=1, **c), A2CConfig],
                         ids=["ppo", "a2c"])
def test_on_policy_config_rejects_bad_shared_values(config, changes, message):
    run = type("Run", (), {"env": type("Env", (), {"num_envs": 1})()})()
    with pytest.raises(UserError, match=message):
        config(**changes).validate(run)


def test_an_optimizer_is_built_at_its_first_use_and_only_once():
    # torch imports torch._dynamo with the first optimizer (~1 s): a run's first env step
    # comes before it
    layer = torch.nn.Linear(2, 1)
    builds: list[torch.optim.Optimizer] = []

    def build() -> torch.optim.Optimizer:
        builds.append(torch.optim.SGD(layer.parameters(), lr=0.5))
        return builds[-1]

    lazy = LazyOptimizer(build)
    assert builds == []
    layer(torch.ones(1, 2)).sum().backward()
    lazy.step()
    lazy.param_groups[0]["lr"] = 0.1
    assert len(builds) == 1 and lazy.built is builds[0] and builds[0].param_groups[0]["lr"] == 0.1


def test_adam_state_round_trips_into_a_fresh_adam():
    layer = torch.nn.Linear(2, 1)
    trained = adam(layer.parameters(), 1e-3)
    layer(torch.ones(1, 2)).sum().backward()
    trained.step()
    fresh = adam(layer.parameters(), 1e-3)
    fresh.load_state_dict(trained.state_dict())
    assert fresh.state_dict()["state"][0]["step"] == trained.state_dict()["state"][0]["step"] == 1


def _imported_modules(path: Path) -> set[str]:
    """Every module an algorithm file imports, at any depth (TYPE_CHECKING ones too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


SHARED = ("__init__.py", "base.py", "optim.py", "seed_optim.py", "off_policy_steps.py", "draws.py",
          "steps.py",
          "compiled.py",
          "natural_gradient.py")
"""The modules of algos/ that are not an algorithm: what the algorithms share."""
EXTENDS = {"tqc": "sac", "qrdqn": "dqn", "crossq": "sac"}
"""algorithm -> the one algorithm whose class it subclasses, and may therefore import (TQC is SAC
with quantile critics: SAC's actor, temperature, acting, state and `stack`, called, not copied;
QR-DQN is DQN with quantiles: DQN's acting, update, targets' schedule, state and `stack`;
CrossQ is SAC without targets, with batch-renormalized networks: SAC's actor and temperature step,
acting and state)."""


@pytest.mark.parametrize("path", sorted(p for p in ALGOS_DIR.glob("*.py")
                                        if p.name not in SHARED),
                         ids=lambda p: p.stem)
def test_an_algorithm_file_imports_no_other_algorithm_nor_the_run_config(path):
    imported = _imported_modules(path)
    own = {f"rltrain.algos.{Path(name).stem}" for name in SHARED if name != "__init__.py"}
    own |= {"rltrain.algos.configs.base", f"rltrain.algos.configs.{path.stem}"}
    own |= {f"rltrain.algos.{EXTENDS[path.stem]}"} if path.stem in EXTENDS else set()
    others = {m for m in imported if m.startswith("rltrain.algos.") and m not in own}
    assert not others
    assert not {m for m in imported if m == "rltrain.config" or m.startswith("rltrain.config.")}


@pytest.mark.parametrize("path", sorted((ALGOS_DIR / "configs").glob("*.py")), ids=lambda p: p.stem)
def test_a_config_module_imports_no_torch_nor_an_algorithm(path):
    # composing, validating and `rltrain --help` read these without importing torch
    imported = _imported_modules(path)
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}
    assert not {m for m in imported
                if m.startswith("rltrain.algos.") and not m.startswith("rltrain.algos.configs.")}
