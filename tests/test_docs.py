"""The generated config reference stays in step with the dataclasses."""

from pathlib import Path

from rltrain.cli.docs import field_docs, render
from rltrain.config.registry import ALGOS

ROOT = Path(__file__).resolve().parents[1]


def test_config_reference_is_up_to_date():
    committed = (ROOT / "docs" / "config.md").read_text()
    assert committed == render(), "run `python -m rltrain.cli.docs > docs/config.md`"


def test_every_algorithm_field_has_a_docstring():
    for name, spec in ALGOS.items():
        docs = field_docs(spec.config)
        missing = [f for f in spec.config.__dataclass_fields__ if f not in docs]
        assert not missing, f"{name}: fields without a docstring: {missing}"
