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
    its tensors passed and returned as they are (and only the asked rows evaluated)."""
    env = make_env(EnvConfig(id="CartPole-v1", num_envs=3), torch.device("cpu"))
    algo = ppo.build(ppo.PPOConfig(hidden_sizes=[8]), env.spec, "cpu")
    obs = env.reset(seed=0)
    one = OnPolicyMembers([algo], env.spec)
    torch.manual_seed(1)
    action, log_prob, value = algo.act(obs)
    torch.manual_seed(1)
    got = one.act([obs])
    assert all(torch.equal(g[0], w) for g, w in zip(got, (action, log_prob, value), strict=True))
    rows = torch.tensor([True, False, True])
    cut = one.value([obs], rows=[rows])
    assert torch.equal(cut[0][rows], algo.value(obs[rows])) and cut[0][1] == 0
    env.close()


def test_runs_rows_join_in_run_order_and_a_single_run_keeps_its_own():
    """The loops store every run's rows as one `[S*N]` (run k's rows k*N ...): a single run's
    tensor (or Dict observation) is passed on as it is, not copied."""
    from rltrain.obs import join
    from rltrain.runner.on_policy import step_rows
    from rltrain.types import StepResult

    one = torch.arange(3.0)
    assert join([one]) is one
    assert join([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]).tolist() == [1, 2, 3, 4]
    joined = join([{"a": torch.zeros(2, 1)}, {"a": torch.ones(2, 1)}])
    assert joined["a"].squeeze(1).tolist() == [0, 0, 1, 1]

    def step(r, t):
        return StepResult(torch.zeros(2, 1), torch.tensor(r), torch.tensor(t),
                          torch.tensor([False, t[1]]), torch.zeros(2, 1))

    first, second = step([1.0, 2.0], [True, False]), step([3.0, 4.0], [False, True])
    assert all(a is b for a, b in zip(step_rows([first]), (first.reward, first.terminated,
                                                           first.truncated), strict=True))
    reward, terminated, truncated = step_rows([first, second])
    assert reward.tolist() == [1, 2, 3, 4] and terminated.tolist() == [True, False, False, True]
    assert truncated.tolist() == [False, False, False, True]
