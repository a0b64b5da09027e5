"""The package's import graph: no cycles and none of the arrows docs/architecture.md forbids.

Imports are read with `ast` from every module, wherever they stand: at the top, inside a function
or under `TYPE_CHECKING` (a cycle hidden in a function body is still a cycle to a reader).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rltrain"
ENTRY_POINTS = ("rltrain.cli", "rltrain.launch", "rltrain.api")
"""The command line, the launch functions both entry points call, and the Python API."""
BELOW_ENTRY_POINTS = (
    "rltrain.algos", "rltrain.buffers", "rltrain.checkpoint", "rltrain.config", "rltrain.envs",
    "rltrain.evaluation", "rltrain.export", "rltrain.loggers", "rltrain.nets",
    "rltrain.parallel", "rltrain.report", "rltrain.runner", "rltrain.seed_batch", "rltrain.sweep",
    "rltrain.run_folder")
"""What the entry points are built from (torchrun's rank setup included: it reads the run
folder and resume checks from `rltrain.run_folder`, as the command line and `train()` do)."""
COMMAND_LINE = "rltrain.cli"
"""The `rltrain` command: imported only by itself and `python -m rltrain` (`rltrain.__main__`)."""
# (importer prefix, imported prefix): layers that must not know each other
FORBIDDEN = [
    # an algorithm is math: no loop, sink, env, run config, file or seed batch
    ("rltrain.algos", "rltrain.runner"), ("rltrain.algos", "rltrain.loggers"),
    ("rltrain.algos", "rltrain.envs"), ("rltrain.algos", "rltrain.config"),
    ("rltrain.algos", "rltrain.checkpoint"), ("rltrain.algos", "rltrain.seed_batch"),
    # the envs own their config section (envs/config.py): nothing from config validation
    ("rltrain.envs", "rltrain.algos"), ("rltrain.envs", "rltrain.config"),
    ("rltrain.envs", "rltrain.runner"),
    ("rltrain.nets", "rltrain.algos"), ("rltrain.nets", "rltrain.config"),
    ("rltrain.loggers", "rltrain.runner"), ("rltrain.loggers", "rltrain.config.registry"),
    ("rltrain.buffers", "rltrain.runner"), ("rltrain.buffers", "rltrain.algos"),
    # checkpoint files and run folders: read by the layers above, reading none of them
    ("rltrain.checkpoint", "rltrain.config"), ("rltrain.checkpoint", "rltrain.runner"),
    ("rltrain.checkpoint", "rltrain.envs"), ("rltrain.checkpoint", "rltrain.algos"),
    # a config is composed and validated before anything is built
    ("rltrain.config", "rltrain.runner"), ("rltrain.config", "rltrain.seed_batch"),
    ("rltrain.config", "rltrain.evaluation"), ("rltrain.config", "rltrain.sweep"),
    # a seed batch and a sweep's trial are built from runners, never the other way round
    ("rltrain.runner", "rltrain.seed_batch"), ("rltrain.runner", "rltrain.sweep"),
    ("rltrain.evaluation", "rltrain.runner"),
    # where a run trains and what it continues is read before any run is built: the run and
    # the batch read it, never the other way round; it reads configs and files, which know
    # nothing of it
    *[("rltrain.run_folder", layer) for layer in ("rltrain.runner", "rltrain.seed_batch",
                                                  "rltrain.sweep", "rltrain.parallel",
                                                  "rltrain.evaluation", "rltrain.algos")],
    *[(layer, "rltrain.run_folder") for layer in ("rltrain.config", "rltrain.checkpoint")],
    *[(layer, entry) for layer in BELOW_ENTRY_POINTS for entry in ENTRY_POINTS],
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package modules `path` imports (`from a import b` counts `a.b` when it is a module)."""
    found: set[str] = set()
    package = module_name(path).rpartition(".")[0] if path.name != "__init__.py" else module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            subs = [f"{base}.{alias.name}" for alias in node.names]
            # `from pkg import module` is an edge to the module, not to the package's __init__
            names = subs if all(n in modules for n in subs) else [base, *subs]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found - {module_name(path)}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_is_read_with_function_level_imports():
    # the reader itself: an import inside a function is an edge (the registry's lazy imports)
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_cycle(graph):
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


@pytest.mark.parametrize(("src", "dst"), FORBIDDEN, ids=[f"{s}->{d}" for s, d in FORBIDDEN])
def test_no_forbidden_arrow(graph, src, dst):
    arrows = sorted(f"{a} -> {b}" for a, targets in graph.items() if a.startswith(src)
                    for b in targets if b.startswith(dst))
    assert not arrows, arrows


def test_nothing_outside_the_command_line_imports_it(graph):
    # api.py read resume checks from cli/run_target.py: what train() and torchrun share with
    # the command line lives below it (`rltrain.run_folder`), never in it
    inside = (COMMAND_LINE, "rltrain.__main__")
    arrows = sorted(f"{a} -> {b}" for a, targets in graph.items()
                    if a != inside[1] and not _within(a, COMMAND_LINE)
                    for b in targets if _within(b, COMMAND_LINE))
    assert not arrows, arrows
    assert graph["rltrain.__main__"] == {"rltrain.cli.commands"}  # the check reads real arrows


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_the_package_root_shows_the_architecture():
    # issue 45: 33 modules at the root hid the layers; the rest live in named sub-packages
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 12, modules
