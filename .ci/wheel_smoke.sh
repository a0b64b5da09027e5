#!/usr/bin/env bash
# What a user of a release gets: the wheel built from this tree, installed (not editable) into a
# fresh venv with its dependencies, run from a folder that holds no rltrain source. Called by
# `make test-wheel` with that venv's bin/ as $1. Each step must exit 0 and leave what it promises.
set -euo pipefail
BIN="$(cd "$1" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

where="$("$BIN/python" -c 'import rltrain, pathlib; print(pathlib.Path(rltrain.__file__).parent)')"
case "$where" in
  */site-packages/rltrain) echo "wheel: rltrain imported from $where" ;;
  *) echo "wheel: rltrain imported from $where, not from the installed wheel" >&2; exit 1 ;;
esac
# every package of the source tree is in the wheel (the source is one folder above the Makefile)
"$BIN/python" - "$OLDPWD" <<'PY'
import pathlib, pkgutil, sys, rltrain
src = pathlib.Path(sys.argv[1]) / "rltrain"
want = {".".join(p.relative_to(src.parent).parts[:-1]) for p in src.rglob("__init__.py")}
have = {"rltrain"} | {m.name for m in pkgutil.walk_packages(rltrain.__path__, "rltrain.") if m.ispkg}
missing = sorted(want - have)
assert not missing, f"packages missing from the wheel: {missing}"
print(f"wheel: all {len(want)} packages of rltrain/ installed")
PY

"$BIN/rltrain" --help > help.txt
grep -q "rltrain eval" help.txt
"$BIN/rltrain" list > list.txt
grep -qi "ppo" list.txt && grep -qi "sac" list.txt
"$BIN/rltrain" algo=ppo env=CartPole-v1 total_timesteps=2048 env.num_envs=4 algo.n_steps=128 \
  logger=none progress=off hydra.run.dir=run > train.txt 2>&1 || { cat train.txt; exit 1; }
test -s run/checkpoints/latest.pt
"$BIN/rltrain" eval ckpt=run episodes=2 > eval.txt 2>&1 || { cat eval.txt; exit 1; }
grep -qi "return" eval.txt
"$BIN/rltrain" export ckpt=run format=onnx > export.txt 2>&1 || { cat export.txt; exit 1; }
test -s run/export/policy.onnx
"$BIN/rltrain" export ckpt=run format=torchscript > export_ts.txt 2>&1 || { cat export_ts.txt; exit 1; }
ls run/export
echo "wheel: --help, list, train, eval and export (ONNX, TorchScript) ran from the installed wheel"
