"""Public seams instead of private reach: no module of rltrain imports a leading-underscore name
of another package, nor touches another module's private attributes.

- Imports (module level or inside functions): `from a.b import _x` and `import a._b` are
  refused where the private name belongs to another folder of rltrain, or to another library.
  Modules of one folder may share private helpers: a folder is one package with one owner, so
  its private names are that package's, not one file's.
- Attributes: `obj._x` (read, write or delete, `obj` not `self`, `cls`, `super()` or an imported
  module) is refused unless `_x` is defined (`self._x = ...`, a class-level `_x`, a `def _x`)
  in this module and in no other rltrain module: an object's private fields are its class's
  business, even within one folder. So `envs/rows.py` is the one module that may touch
  gymnasium's `_autoreset_envs` (`autoreset_flags`, pinned by tests/envs/test_rows.py).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rltrain"


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def dotted(path: Path) -> str:
    """`rltrain/envs/make.py` -> `rltrain.envs.make` (a package's `__init__.py`: the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """Every (line, dotted name) `path` imports; relative imports resolved."""
    here = dotted(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return out


def owner_folder(name: str) -> Path | None:
    """The rltrain folder whose private name `name` is (the folder of the module or package
    above its first private part); None for another library's."""
    parts = name.split(".")
    if parts[0] != "rltrain":
        return None
    owner = parts[:next(i for i, p in enumerate(parts) if private(p))]
    path = ROOT.joinpath(*owner)
    return path if path.is_dir() else path.parent


def import_offences(path: Path, tree: ast.Module) -> list[str]:
    out = []
    for line, name in imported_names(path, tree):
        if any(private(p) for p in name.split(".")) and owner_folder(name) != path.parent:
            out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


def definitions(tree: ast.Module) -> set[str]:
    """The private attribute names a module defines: `self._x = ...`, class-level `_x`,
    `def _x` (methods, properties, functions), `class _X`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            for stmt in node.body if isinstance(node, ast.ClassDef) else ():
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [
                    getattr(stmt, "target", None)]
                out |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id == "self"):
            out.add(node.attr)
    return {name for name in out if private(name)}


def module_names(tree: ast.Module) -> set[str]:
    """Names bound by `import x` / `import x as y` (a library's module, not an object)."""
    return {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.Import) for alias in node.names}


def on_own_object(node: ast.Attribute, modules: set[str]) -> bool:
    value = node.value
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls") or value.id in modules
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "super")


def attribute_offences(all_trees: dict[Path, ast.Module]) -> list[str]:
    owners: dict[str, set[Path]] = defaultdict(set)
    for path, tree in all_trees.items():
        for name in definitions(tree):
            owners[name].add(path)
    out = []
    for path, tree in all_trees.items():
        modules = module_names(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and private(node.attr)
                    and not on_own_object(node, modules) and owners[node.attr] != {path}):
                others = sorted(str(p.relative_to(ROOT)) for p in owners[node.attr] - {path})
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} touches {ast.unparse(node)}"
                           f" (defined in {', '.join(others) or 'another library'})")
    return out


def test_no_module_imports_a_private_name_of_another_package():
    offences = [o for path, tree in trees().items() for o in import_offences(path, tree)]
    assert not offences, "\n".join(offences)


def test_no_module_touches_another_modules_private_attributes():
    offences = attribute_offences(trees())
    assert not offences, "\n".join(offences)


def test_the_checks_see_what_they_refuse(tmp_path):
    """Each kind of reach, as a module of rltrain would write it, is caught."""
    code = ("from rltrain.algos.ppo import _KL\nimport rltrain.envs._hidden\n"
            "def f():\n    from ..algos import _x\n    from .rows import _y\n"
            "def g(env):\n    env._ep_return[:] = 0\n    return env._engine, self._own\n")
    path = PACKAGE / "seed_batch" / "reach.py"  # parsed as if it were there, never written
    tree = ast.parse(code)
    assert [o.split(" imports ")[1] for o in import_offences(path, tree)] == [
        "rltrain.algos.ppo._KL", "rltrain.envs._hidden", "rltrain.algos._x"]
    own = ast.parse("class A:\n    _engine = None\n")
    found = attribute_offences({path: tree, PACKAGE / "envs" / "rows.py": own})
    assert [o.split(" touches ")[1].split(" (")[0] for o in found] == [
        "env._ep_return", "env._engine"]
    assert "(defined in rltrain/envs/rows.py)" in found[1]
