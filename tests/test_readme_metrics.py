"""The Metrics table of docs/logging.md (linked from the README) against what runs actually
log: every name a run of each algorithm writes to metrics.csv is documented, and every documented
name is logged by some run (except the env-defined ones, which need an env that reports
extras)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from rltrain.config.registry import ALGOS
from rltrain.runner.runner import Runner
from tests.runner.test_every_algo import tiny

METRICS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "logging.md"
ENV_DEFINED = ("reward/<name>", "extra/<key>")
"""Documented names that only an env with reward components or `log` extras produces."""


def documented() -> list[str]:
    """The backticked names in the first column of the Metrics table of docs/logging.md."""
    section = METRICS_PAGE.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


def pattern(name: str) -> re.Pattern[str]:
    """`time/<section>_s` -> a regex where each `<...>` is one path segment (or part of one)."""
    parts = re.split(r"<[^>]+>", name)
    return re.compile("[^/]+".join(re.escape(p) for p in parts) + r"\Z")


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict[str, set[str]]:
    """Metric names of one short run of each algorithm, of PPO on a Box action space (with
    normalizer stats logged), and of DQN on an env that reports `is_success`."""
    out = {}
    runs = [(name, name) for name in sorted(ALGOS)] + [("ppo_box", "ppo"), ("dqn_goal", "dqn")]
    for label, name in runs:
        folder = tmp_path_factory.mktemp(label)
        # ARS scores raw returns and refuses reward normalization
        own = (("env.normalize_reward=true",) if ALGOS[name].family == "on_policy"
               and name != "ars" else
                ("algo.train_freq=4",) if name == "dqn" else ())
        if label == "ppo_box":
            own += ("env.id=Pendulum-v1",)
        if label == "dqn_goal":  # an env reporting `is_success`: the success rates
            own += ("env.id=tests.envs.goal_envs:SucceedsEveryOther",)
        cfg = tiny(name, extra=("logger.tensorboard=false", "logger.csv=true", "logger.log_freq=0",
                                "logger.log_norm_stats=true", "env.normalize_obs=true",
                                "eval.freq=48", *own))
        Runner(cfg, folder).run()
        with open(folder / "metrics.csv", newline="") as f:
            out[label] = {row["name"] for row in csv.DictReader(f)}
    return out


def test_the_readme_links_the_page_that_holds_the_table():
    readme = (METRICS_PAGE.parents[1] / "README.md").read_text()
    assert "](docs/logging.md)" in readme


def test_the_table_is_found_and_has_patterns():
    names = documented()
    assert "eval/mean_reward" in names and "time/<section>_s" in names
    assert pattern("time/<section>_s").match("time/env_s")
    assert not pattern("time/<section>_s").match("time/a/b_s")


def test_every_logged_metric_is_in_the_docs(logged):
    patterns = [pattern(n) for n in documented()]
    missing = {algo: sorted(n for n in names if not any(p.match(n) for p in patterns))
               for algo, names in logged.items()}
    assert not any(missing.values()), (
        f"logged but not in the Metrics table of docs/logging.md: {missing}")


def test_every_documented_metric_is_logged_by_some_run(logged):
    everything = set().union(*logged.values())
    stale = [n for n in documented() if n not in ENV_DEFINED
             and not any(pattern(n).match(m) for m in everything)]
    assert not stale, f"in the Metrics table of docs/logging.md but no run logs it: {stale}"
