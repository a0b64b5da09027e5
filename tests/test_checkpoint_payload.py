"""The checkpoint payload schema (`rltrain/checkpoint/payload.py`): every reader checks a loaded payload
before using it, so a damaged checkpoint is one `rltrain: error:` line, never a traceback."""

from __future__ import annotations

import copy
import itertools
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltrain.checkpoint import format as checkpoint
from rltrain.checkpoint.payload import EVAL, RESUME, check_payload
from rltrain.errors import UserError
from rltrain.evaluation.command import evaluate
from rltrain.runner.runner import Runner
from tests.e2e.harness import assert_refused, run_cli


@pytest.fixture(autouse=True)
def _no_learning_curve(monkeypatch):
    """Skip the matplotlib learning curve each run draws (0.7 s; not what is tested here)."""
    monkeypatch.setattr("rltrain.runner.runner.write_run_curve", lambda run_dir: None)


def stop_at(step: int):
    def fn(state):
        if state.global_step >= step:
            state.stop = True
    return fn


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """`latest.pt` of a PPO CartPole run (normalized obs and rewards) stopped at step 64 of 96."""
    from rltrain.algos.configs.ppo import PPOConfig
    from rltrain.config.schema import (
        CheckpointConfig,
        EnvConfig,
        EvalConfig,
        LoggerConfig,
        TrainConfig,
    )
    from rltrain.config.validation import validate

    cfg = validate(TrainConfig(
        algo=PPOConfig(n_steps=16, batch_size=16, n_epochs=1, hidden_sizes=[16]),
        env=EnvConfig(id="CartPole-v1", num_envs=2, max_episode_steps=20, normalize_obs=True,
                      normalize_reward=True),
        logger=LoggerConfig(tensorboard=False, csv=False),
        eval=EvalConfig(freq=0, episodes=1, num_envs=1), checkpoint=CheckpointConfig(freq=0),
        total_timesteps=96, progress="off", seed=0))
    run = tmp_path_factory.mktemp("stopped")
    import rltrain.runner.runner as runner_module

    curve, runner_module.write_run_curve = runner_module.write_run_curve, lambda run_dir: None
    try:
        Runner(cfg, run, callbacks={"post_iteration": [stop_at(64)]}).run()
    finally:
        runner_module.write_run_curve = curve
    return run / "checkpoints" / "latest.pt"


def damaged(stopped_run: Path, tmp_path: Path, change) -> Path:
    """A copy of the stopped run's checkpoint with `change(payload)` applied, written raw."""
    payload = checkpoint.load(stopped_run)
    change(payload)
    path = tmp_path / "checkpoints" / "latest.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return path


def refusal(path: Path, require: tuple[str, ...]) -> str:
    with pytest.raises(UserError) as err:
        checkpoint.load(path, require=require)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_valid_checkpoint_passes_every_check(stopped_run):
    payload = checkpoint.load(stopped_run, require=RESUME)
    check_payload(payload, stopped_run, RESUME)
    assert set(payload["env"]) >= {"obs_rms", "ret_rms", "running_return", "sim"}


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: p["counters"].pop("global_step"), "checkpoint field counters.global_step is missing"),
    (lambda p: p["counters"].update(global_step="12"),
     "checkpoint field counters.global_step is a str, expected int"),
    (lambda p: p["counters"].update(iteration=True),
     "checkpoint field counters.iteration is a bool, expected int"),
    (lambda p: p["counters"].update(global_step=-5),
     "checkpoint field counters.global_step is -5, expected an int >= 0"),
    (lambda p: p["counters"].update(best_eval=None),
     "checkpoint field counters.best_eval is a None, expected float"),
    (lambda p: p.update(format_version=True), "checkpoint field format_version is a bool"),
    (lambda p: p.update(config=[1]), "checkpoint field config is a list, expected dict"),
    (lambda p: p.update(algo="weights"), "checkpoint field algo is a str, expected dict"),
    (lambda p: p["loop"].update(obs=[[0.0]]), "checkpoint field loop.obs is a list, expected a "),
    (lambda p: p["loop"].update(episode_counts=[1]),
     "checkpoint field loop.episode_counts has 1 items, expected 2"),
    (lambda p: p["rng"].update(torch=torch.zeros(3, dtype=torch.uint8)),
     "checkpoint field rng.torch has shape [3], expected [5056]"),
    (lambda p: p["rng"]["numpy"].update(pos=700),
     "checkpoint field rng.numpy.pos is 700, expected an int in [0, 624]"),
    (lambda p: p["rng"].update(python=(3, (1, 2), None)),
     "checkpoint field rng.python[1] has 2 items, expected 625"),
    (lambda p: p["schedule"].update(log=1.5), "checkpoint field schedule.log is a float"),
    (lambda p: p["metrics"].update(step=64), "checkpoint field metrics.mean_reward is missing"),
    (lambda p: p["env"]["obs_rms"].update(mean=1.0),
     "checkpoint field env.obs_rms.mean is a float, expected a tensor"),
    (lambda p: p.pop("rng"), "checkpoint field rng is missing"),
])
def test_a_damaged_resume_checkpoint_is_one_line_naming_the_field(stopped_run, tmp_path, change,
                                                                  message):
    path = damaged(stopped_run, tmp_path, change)
    assert refusal(path, RESUME).startswith(f"{path}: {message}")


def test_eval_needs_only_config_and_algo(stopped_run, tmp_path):
    path = damaged(stopped_run, tmp_path, lambda p: [p.pop(k) for k in ("rng", "loop", "schedule")])
    checkpoint.load(path, require=EVAL)  # eval and export do not read them
    assert refusal(path, RESUME).endswith("checkpoint field schedule is missing")
    path = damaged(stopped_run, tmp_path, lambda p: p["counters"].update(global_step="x"))
    assert "counters.global_step is a str" in refusal(path, EVAL)  # present: checked anyway


def test_eval_of_a_normalized_run_without_its_statistics_is_refused(stopped_run, tmp_path):
    path = damaged(stopped_run, tmp_path, lambda p: p["env"].pop("obs_rms"))
    with pytest.raises(UserError, match=r"checkpoint field env.obs_rms is missing; the run "
                                        r"normalized observations"):
        evaluate(path, episodes=1, num_envs=1, write=False)


@pytest.mark.parametrize(("field", "value"), [
    ("hidden_sizes", [1_000_000_000]),
    ("hidden_sizes", [16_384, 16_384]),  # within the width cap, but not these weights
    ("net", {"hidden": [1_000_000_000]}),
])
def test_a_checkpoint_declaring_an_absurd_network_is_refused_before_any_is_built(
        stopped_run, tmp_path, monkeypatch, field, value):
    def change(p):
        if field == "net":
            p["config"]["algo"]["net"].update(value)
        else:
            p["config"]["algo"][field] = value
    path = damaged(stopped_run, tmp_path, change)

    def build(*args, **kwargs):
        raise AssertionError("a network was built")
    monkeypatch.setattr("rltrain.algos.ppo.PPO.__init__", build)
    with pytest.raises(UserError) as err:
        evaluate(path, episodes=1, num_envs=1, write=False)
    assert "checkpoint config declares hidden layers" in str(err.value)
    assert "does not match the weights" in str(err.value)


def test_the_width_cap_refuses_an_absurd_command_line(tiny_cfg):
    with pytest.raises(UserError, match=r"^algo.hidden_sizes=\[1000000000\]: layer widths are at "
                                        r"most 16,384"):
        tiny_cfg(algo={"hidden_sizes": [1_000_000_000]})


# ---- fuzzing: a damaged checkpoint never gets a traceback out of `rltrain` ---------------------

REPLACEMENTS = [None, True, -1, 0, 3, 2.5, "x", [], {}, (1, 2), [0.5], {"a": 1}]


def _children(node) -> list:
    if isinstance(node, dict):
        return list(node)
    if isinstance(node, list):
        return list(range(len(node)))
    return []  # tensors, numbers, and tuples (left whole: they cannot be changed in place)


def _reshaped(value: torch.Tensor) -> torch.Tensor:
    shape = list(value.shape) or [1]
    shape[0] += 1
    return torch.zeros(shape, dtype=value.dtype)


def mutate(payload: dict, data) -> str:
    """One random change at a random place of `payload`: delete, replace, reshape, add a key."""
    node, parent, key, path = payload, None, None, []
    while _children(node) and (not path or data.draw(st.integers(0, 2)) > 0):  # go deeper: 2/3
        parent, key = node, data.draw(st.sampled_from(_children(node)))
        node = node[key]
        path.append(str(key))
    op = data.draw(st.sampled_from(["delete", "replace", "reshape", "extra"]))
    if op == "extra" and isinstance(node, dict):
        node["surprise"] = copy.deepcopy(data.draw(st.sampled_from(REPLACEMENTS)))
    elif op == "reshape" and isinstance(node, torch.Tensor):
        parent[key] = _reshaped(node)
    elif op == "delete":
        del parent[key]
    else:  # a copy: a later change must not alter REPLACEMENTS for the next examples
        parent[key] = copy.deepcopy(data.draw(st.sampled_from(REPLACEMENTS)))
    return f"{op} {'.'.join(path)}"


_COUNTER = itertools.count()
FUZZ_EXAMPLES = int(os.environ.get("RLTRAIN_FUZZ_EXAMPLES", "12"))
"""Damaged checkpoints tried per run: 12 in `make test` (each is a CLI eval or resume, ~2 s);
`make test-all` tries 100."""


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_a_randomly_damaged_checkpoint_works_or_is_refused_in_one_line(
        stopped_run, tmp_path, monkeypatch, capfd, data):
    payload = checkpoint.load(stopped_run)
    changes = [mutate(payload, data) for _ in range(data.draw(st.integers(1, 2)))]
    folder = tmp_path / f"case{next(_COUNTER)}"
    path = folder / "checkpoints" / "latest.pt"
    path.parent.mkdir(parents=True)
    torch.save(payload, path)
    command = data.draw(st.sampled_from(["eval", "eval", "resume", "resume", "resume_into"]))
    if command == "eval":
        argv = ["eval", f"ckpt={path}", "episodes=1", "num_envs=1"]
    else:  # resume in the checkpoint's folder (checked before Hydra starts), or into another
        into = [f"hydra.run.dir={folder / 'resumed'}"] if command == "resume_into" else []
        argv = [f"resume={path}", *into, "logger=none", "progress=off"]
    result = run_cli(argv, folder, monkeypatch, capfd)
    note = f"{changes} -> {command}: {result.describe()}"
    assert "Traceback" not in result.out + result.err, note
    if result.rc != 0:
        assert_refused(result, 2)
