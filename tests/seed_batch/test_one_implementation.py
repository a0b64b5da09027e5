"""`seed_batch/` holds what is about seeds only: no loss, target or optimizer arithmetic of its own.

Each algorithm's math is written once in `rltrain/algos/` (over the last dimension, so a seed
batch's stacked tensors run the same lines: `tests/seed_batch/test_equivalence.py`). This scans the
source of `rltrain/seed_batch/` for the operations that such math is made of; a second copy of a
loss, a TD target, a clipping rule or an optimizer step written there fails here, naming the
line and where the one implementation lives.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SEEDS = Path(__file__).resolve().parents[2] / "rltrain" / "seed_batch"

# call or attribute name -> where that piece of math lives
MATH = {
    "smooth_l1_loss": "algos/dqn.py dqn_loss", "mse_loss": "algos/off_policy_steps.py mse_losses",
    "td_target": "algos/*: each algorithm's target", "pow": "algos/*: the losses",
    "min": "algos/*: clipped surrogates and double-Q targets", "clip_grad_norm": "algos/optim.py",
    "_fused_adam_": "algos/optim.py fused_adam_", "_foreach_lerp_": "algos/steps.py soft_update_",
    "_foreach_addcdiv_": "algos/optim.py", "_foreach_addcmul_": "algos/optim.py",
    "_foreach_sqrt": "algos/optim.py", "addcdiv_": "algos/optim.py", "lerp_": "algos/base.py",
    "clip_scale": "algos/optim.py (clip_grad_norm and clip_grad_norm_per_seed call it)",
}
ALLOWED: set[tuple[str, str]] = set()  # (file, name) pairs a seed_batch/ file may call


def math_uses(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every call of a `MATH` name in `path` (methods and functions alike)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in MATH and (path.name, name) not in ALLOWED:
                found.append((node.lineno, name))
    return found


@pytest.mark.parametrize("path", sorted(SEEDS.glob("*.py")), ids=lambda p: p.name)
def test_seeds_write_no_math_of_their_own(path):
    found = math_uses(path)
    assert not found, "\n".join(f"rltrain/seed_batch/{path.name}:{line}: {name}() is math: it "
                                f"belongs in {MATH[name]}" for line, name in found)


def test_the_scan_finds_math_where_there_is_some(tmp_path):
    """The scan itself: a file with a copied loss and a copied Adam step is caught."""
    copy = tmp_path / "ppo_copy.py"
    copy.write_text("def loss(v, r):\n    return (r - v).pow(2).mean(-1)\n\n"
                    "def step(p, g, m, v):\n    torch._fused_adam_(p, g, m, v, [], [])\n")
    assert sorted(name for _, name in math_uses(copy)) == ["_fused_adam_", "pow"]
