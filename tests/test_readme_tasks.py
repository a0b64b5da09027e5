"""The README's task table stays true: every command in it composes, applies a tuned preset, and
trains for the budget its row reports (a preset's budget changes, the row must follow)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rltrain.config.compose import compose_train_config

README = Path(__file__).resolve().parents[1] / "README.md"
UNITS = {"k": 1_000, "M": 1_000_000}


def task_rows() -> list[tuple[str, str, int]]:
    """(family, command, budget) of each row of the README's task table."""
    text = README.read_text()
    table = text[text.index("## Tasks"):text.index("\nReturn: median")]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 4 or not cells[2].startswith("`rltrain "):
            continue
        budget = re.search(r"\((\d+)([kM])", cells[3])
        assert budget, f"no budget in {cells[3]!r}"
        rows.append((cells[0], cells[2].strip("`"), int(budget.group(1)) * UNITS[budget.group(2)]))
    return rows


def test_the_table_has_every_family_and_one_fastest_each():
    text = README.read_text()
    families = {family for family, _, _ in task_rows()}
    assert families == {"classic", "Box2D", "MuJoCo", "Atari"}
    for family in families:
        bold = [line for line in text.splitlines() if line.startswith(f"| {family} | **")]
        assert len(bold) == 1, (family, bold)


@pytest.mark.parametrize("family,command,budget", task_rows(), ids=lambda x: str(x)[:40])
def test_each_command_trains_its_preset_for_the_budget_shown(family, command, budget):
    argv = shlex.split(command)[1:]
    cfg = compose_train_config(argv)
    assert cfg.preset, f"{command}: no tuned preset applies"
    assert cfg.total_timesteps == budget, (
        f"{command} trains {cfg.total_timesteps:,} steps; its README row says {budget:,}")
