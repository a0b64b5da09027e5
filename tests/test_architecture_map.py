"""docs/architecture.md is a true map: every path and Python name it cites exists today.

How the page is read (the rules are strict on purpose: a name that no longer exists fails):

1. Fenced blocks (the picture) are split into whitespace-separated tokens, whose paths (rule 4)
   and `snake_case` / `CamelCase` words (rule 5) are checked; the rest of the page is read for
   inline code spans (between single backticks, across line breaks).
2. Anywhere on the page, prose and fences included, every `rltrain.a.b` (or `rltrain.a:b`) must
   import: the longest importable module prefix, then attributes for the rest.
3. A span holding whitespace, `=` or a quote, or naming a gymnasium id (`...-v5`), is an example
   (a command line, an override, a call with arguments): it is split into tokens like a fence.
4. A token or span with a `/` or a file suffix (`.py`, `.yaml`, `.md`, ...) is a path. It must
   exist relative to the repository root or to `rltrain/` (a trailing `/`: a folder); `<x>`
   placeholders are globs that must match a file. A path that starts with `<run>/` or
   `<batch>/` is inside a run folder: each of its names is spelled in `checkpoint/run_dir.py`.
5. Any other span must be a Python name: `a.b.c` (with an optional `()` or call arguments) is
   imported when `a` is `rltrain`, a sub-package of it or an installed module; otherwise (an
   attribute of a variable such as `ctx.end_iteration()`) every part must be a name defined
   somewhere in `rltrain/` (a class, function, argument, assignment or module). A bare name
   must be defined there too, or be a Python builtin, an installed module or a pytest marker.
   `--flags` are the only other spans allowed.
6. The page's example algorithm and env (`toy`, `my_envs`) do not exist: a path or name of
   theirs needs only its folder or its parent module to exist.

The import-rules table and the root-module list are compared, both ways, with
`tests/test_architecture.py`'s `FORBIDDEN` and with the package itself.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import keyword
import re
from functools import cache
from pathlib import Path

import pytest

from tests.test_architecture import BELOW_ENTRY_POINTS, ENTRY_POINTS, FORBIDDEN

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rltrain"
PAGE = ROOT / "docs" / "architecture.md"
RUN_DIR = PACKAGE / "checkpoint" / "run_dir.py"
EXAMPLES = {"toy", "Toy", "ToyConfig", "my_envs"}
"""The page's example algorithm and env: names it tells you to create."""
SUFFIXES = (".py", ".yaml", ".md", ".json", ".toml", ".txt", ".cfg", ".csv", ".pt")
DOTTED = re.compile(r"\brltrain(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
PUNCTUATION = "\"'`,;:()[]{}"


def split_page(text: str) -> tuple[str, list[str]]:
    """(the page without its fenced blocks, the fenced blocks' lines)."""
    prose, fence, inside = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            fence.append(line)
        else:
            prose.append(line)
    return "\n".join(prose), fence


def code_spans(prose: str) -> list[str]:
    """Inline code spans, whitespace inside them folded to one space."""
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]


@cache
def defined_names() -> frozenset[str]:
    """Every name `rltrain/` defines: modules, packages, classes, functions, their arguments,
    and the targets of assignments (`x = ...`, `self.x = ...`, dataclass fields)."""
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return frozenset(names)


@cache
def run_dir_words() -> frozenset[str]:
    """The string constants of `checkpoint/run_dir.py`: the names of a run folder's files."""
    tree = ast.parse(RUN_DIR.read_text())
    return frozenset(n.value for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str))


def resolve(dotted: str) -> str | None:
    """None if `dotted` (`a.b.c` or `a.b:c`) imports, else why not."""
    parts = dotted.replace(":", ".").split(".")
    if parts[-1] == "__main__":  # importing it would run the command: found, not imported
        return None if importlib.util.find_spec(dotted) else f"no module {dotted!r}"
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that module does not exist: try a shorter prefix
            raise
        for j, attr in enumerate(parts[i:], start=i):
            if not hasattr(obj, attr):
                return f"{'.'.join(parts[:j])} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"no module {parts[0]!r}"


def is_path(token: str) -> bool:
    return ("/" in token and re.search(r"[A-Za-z]", token) is not None) or token.endswith(SUFFIXES)


def path_problem(path: str) -> str | None:
    """None if the cited path exists (rule 4), else why not."""
    parts = path.rstrip("/").split("/")
    if parts[0] in ("<run>", "<batch>"):  # a file of a run folder
        words = run_dir_words()
        for part in parts[1:]:
            literal = part.split("<")[0]
            if not any(w == part or ("<" in part and w.startswith(literal)) for w in words):
                return f"{path}: {part!r} is no name in checkpoint/run_dir.py"
        return None
    if EXAMPLES & {Path(p).stem for p in parts}:  # a file the page tells you to create
        parent = "/".join(parts[:-1])
        return None if any((base / parent).is_dir() for base in (ROOT, PACKAGE)) else \
            f"{path}: no folder {parent!r}"
    pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/"))
    for base in (ROOT, PACKAGE):
        found = list(base.glob(pattern)) if "*" in pattern else [base / pattern]
        if any(p.is_dir() if path.endswith("/") else p.exists() for p in found):
            return None
    return f"{path}: not found under the repository root or rltrain/"


def name_problem(name: str, markers: frozenset[str]) -> str | None:
    """None if the cited Python name exists (rule 5), else why not."""
    parts = name.split(".")
    if EXAMPLES & set(parts):
        return None
    if len(parts) == 1:
        if (name in defined_names() or name in markers or hasattr(builtins, name)
                or keyword.iskeyword(name) or importlib.util.find_spec(name) is not None):
            return None
        return f"{name}: defined nowhere in rltrain/"
    if parts[0] == "rltrain":
        return resolve(name)
    if resolve(f"rltrain.{name}") is None:  # package-relative: `config.registry`
        return None
    if parts[0] not in ("conf", "tests", "benchmarks") and importlib.util.find_spec(parts[0]):
        return resolve(name)  # an installed module: `torch.nn.Module`
    missing = [p for p in parts if p not in defined_names()]  # `ctx.end_iteration`
    return f"{name}: {', '.join(missing)} defined nowhere in rltrain/" if missing else None


def token_problems(tokens: list[str], names: bool = False) -> list[str]:
    """Path problems of the tokens of a fence or an example span (rules 1, 3 and 4); with
    `names` (a fence), also of its `snake_case` and `CamelCase` words (rule 5)."""
    found = []
    for token in tokens:
        token = token.strip(PUNCTUATION)
        if "=" not in token and not re.search(r"-v\d+$", token) and is_path(token):
            found.append(path_problem(token))
        elif names and re.fullmatch(r"[a-z]+(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+",
                                    token):
            found.append(name_problem(token, frozenset()))
    return [p for p in found if p]


def problems(text: str, markers: frozenset[str] = frozenset()) -> list[str]:
    """Every cited path or name of a page `text` that does not exist."""
    found: list[str | None] = []
    for dotted in sorted(set(DOTTED.findall(text))):
        parts = dotted.replace(":", ".").split(".")
        if EXAMPLES & set(parts):  # `rltrain.algos.toy`: its parent module must import
            dotted = ".".join(parts[:min(parts.index(e) for e in EXAMPLES & set(parts))])
        found.append(resolve(dotted))
    prose, fence = split_page(text)
    found += token_problems(" ".join(fence).split(), names=True)
    for span in code_spans(prose):
        if re.search(r"\s|=|\"|'", span) or re.search(r"-v\d+$", span):
            found += token_problems(span.split())
        elif is_path(span):
            found.append(path_problem(span))
        elif span.startswith("-"):
            continue  # a command-line flag (`--help`)
        elif (call := re.fullmatch(r"(" + NAME.pattern + r")(?:\(\w*\))?", span)) is not None:
            found.append(name_problem(call.group(1), markers))
        else:
            found.append(f"`{span}`: neither a path, a Python name nor an example")
    return [p for p in found if p]


@pytest.fixture(scope="module")
def markers(pytestconfig: pytest.Config) -> frozenset[str]:
    return frozenset(line.split(":")[0] for line in pytestconfig.getini("markers"))


def test_every_path_and_name_the_page_cites_exists(markers):
    found = problems(PAGE.read_text(), markers)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("stale", [
    # the names issue item 7 found on the old page, each as it was cited there
    "`cli.py`", "`config.py`", "`config_checks.py`", "`distributed.py`", "`sweep.py`",
    "`checkpoint.py`", "`rltrain.seed_batch.BATCHABLE`", "the torch-free rltrain.seed_batch.BATCHABLE",
    # and one of each other form the rules read
    "`runner/loops.py`", "`distributed/`", "`conf/algo/<name>.yml`", "`SeedBatchRunner`",
    "`SeedBatch.step_all`", "`<run>/checkpoints/last.pt`", "`rltrain.config.registry:ALGORITHMS`",
    "`python -m rltrain.cli.documentation`", "`python -m rltrain.cli.docs > docs/config.txt`",
    "```\nenvs/ VecEnv ◄──► runner/loop.py\n```", "```\nmodes  launch.py: new_runs\n```",
    "`{seed}`",
])
def test_a_stale_citation_fails(stale):
    assert problems(stale), stale


@pytest.mark.parametrize("current", [
    "`runner/on_policy.py`", "`rltrain/seed_batch/`", "`seed_batch/view.py`", "`conf/tuned/<algo>_<alias>.yaml`",
    "`rltrain.seed_batch.view.SeedView`", "`SeedBatch.step_envs`", "`ctx.end_iteration()`",
    "`<batch>/seed_<s>/`", "`torch.nn.Module`", "`config.registry`", "`rltrain.algos.toy`",
    "`rltrain/algos/configs/toy.py`", "`rltrain env=CartPole-v1`", "`--help`",
])
def test_a_current_citation_passes(current):
    assert problems(current) == [], current


def section(text: str, heading: str) -> str:
    """The text of a `## heading` section, up to the next `## `."""
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_import_rules_table_is_the_tested_list():
    text = section(PAGE.read_text(), "Import rules")
    table = {(f"rltrain.{row[0]}", f"rltrain.{dst}")
             for line in text.splitlines() if line.startswith("| `")
             for row in [code_spans(line)] for dst in row[1:]}
    tested = {(src, dst) for src, dst in FORBIDDEN if dst not in ENTRY_POINTS}
    assert table == tested, (sorted(table - tested), sorted(tested - table))
    below, _, above = text.split("Nothing below the entry points imports them:", 1)[1] \
        .split(". ", 1)[0].partition("never import")
    assert {f"rltrain.{m}" for m in code_spans(below)} == set(BELOW_ENTRY_POINTS)
    assert {f"rltrain.{m}" for m in code_spans(above)} == set(ENTRY_POINTS)


def test_the_layout_names_every_sub_package_and_root_module():
    text = section(PAGE.read_text(), "Layout")
    root = next(p for p in text.split("\n\n") if p.startswith("The root of `rltrain/`:"))
    cited = {s for s in code_spans(root) if s.endswith(".py")}
    assert cited == {p.name for p in PACKAGE.glob("*.py")}
    folders = {s.rstrip("/") for line in text.splitlines() if line.startswith("| `")
               for s in code_spans(line.split("|")[1])}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages <= folders, sorted(packages - folders)
