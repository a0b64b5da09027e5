"""One loop per family: a single run is a batch of one (`runner/one_run.py`), so the two loops of
`runner/` are the only code that drives an algorithm's updates over time, for a single run and
a seed batch alike. A second loop (a batch's own, a GPU capture's, a new algorithm's) fails
here, naming its file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from rltrain.algos import ppo
from rltrain.config.schema import EnvConfig
from rltrain.envs.make import make_env
from rltrain.runner.members import OnPolicyMembers

PACKAGE = Path(__file__).resolve().parents[2] / "rltrain"
LOOPS = {"runner/on_policy.py", "runner/off_policy.py"}


def updates_in_loops(path: Path) -> list[int]:
    """Lines of `<x>.algo.update(...)` / `algo.update(...)` calls inside a `while` loop (a loop
    over time; the members' `for` over seeds is not one)."""
    lines = []
    for loop in ast.walk(ast.parse(path.read_text())):
        if not isinstance(loop, ast.While):
            continue
        for node in ast.walk(loop):
            func = getattr(node, "func", None)
            if (isinstance(node, ast.Call) and isinstance(func, ast.Attribute)
                    and func.attr == "update" and ast.unparse(func.value).split(".")[-1] == "algo"):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_two_loops_drive_updates():
    found = {str(p.relative_to(PACKAGE)): lines for p in PACKAGE.rglob("*.py")
             if (lines := updates_in_loops(p))}
    assert set(found) == LOOPS, found


def test_the_scan_sees_a_second_loop(tmp_path):
    twin = tmp_path / "twin.py"
    twin.write_text("def run(runs):\n    while True:\n        runs.algo.update(batch)\n")
    assert updates_in_loops(twin) == [3]


def test_a_batch_of_one_calls_its_algorithm_as_a_single_run_does():
    """Seen through `OnPolicyMembers` with S = 1, a run's act and value are its own, bit for bit,
    with the runs' dimension added (and only the asked rows evaluated)."""
    env = make_env(EnvConfig(id="CartPole-v1", num_envs=3), torch.device("cpu"))
    algo = ppo.build(ppo.PPOConfig(hidden_sizes=[8]), env.spec, "cpu")
    obs = env.reset(seed=0)
    one = OnPolicyMembers([algo], env.spec)
    torch.manual_seed(1)
    action, log_prob, value = algo.act(obs)
    torch.manual_seed(1)
    got = one.act(obs.unsqueeze(0))
    assert all(torch.equal(g[0], w) for g, w in zip(got, (action, log_prob, value), strict=True))
    rows = torch.tensor([[True, False, True]])
    cut = one.value(obs.unsqueeze(0), rows=rows)
    assert torch.equal(cut[0, rows[0]], algo.value(obs[rows[0]])) and cut[0, 1] == 0
    env.close()
