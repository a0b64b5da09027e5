"""Writing and reloading the two export formats: ONNX (`rltrain[export]`) and TorchScript.

ONNX uses torch's default exporter (`torch.onnx.export(dynamo=True)`, which needs `onnxscript`);
the older TorchScript-based one (`dynamo=False`) still works offline in torch 2.13 but warns
that it will be removed. TorchScript is `torch.jit.trace`, built into torch; torch 2.13 marks
`torch.jit` deprecated (a `DeprecationWarning`) in favour of `torch.export`, but it works.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rltrain.errors import UserError
from rltrain.nets.mode import eval_mode

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export format → default file name under `<run>/export/`."""
EXPORT_EXTRA = 'pip install "rltrain[export]"'
Runner = Callable[..., Any]
"""A loaded export: observations `[B, *obs_shape]` (float32, or uint8 for pixel policies; a
dict of entries for Dict / Tuple observations) → actions as numpy; a recurrent one takes (obs,
state `[L, B, D]`) and returns (actions, state)."""
INPUTS = ["obs", "state", "action_mask"]
"""Input names of an export, in order: `obs` (Dict / Tuple observations: `obs.<key>` per
entry); `state` for a recurrent policy; `action_mask` (bool `[B, n]`) for a policy trained on
an env with invalid-action masks."""
METADATA_KEY = "rltrain"
"""The exported file's metadata entry (a JSON object: env id, observation shape and dtype, the
Atari preprocessing contract): ONNX `metadata_props[rltrain]`, TorchScript extra file
`rltrain.json`. `read_metadata` reads it back."""


def check_format(fmt: str) -> None:
    """Raise a one-line `UserError` for an unknown format or a missing optional package."""
    if fmt not in FORMATS:
        raise UserError(f"format={fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "onnx":
        missing = []
        for module in ("onnx", "onnxscript", "onnxruntime"):
            try:
                __import__(module)
            except ImportError:
                missing.append(module)
        if missing:
            raise UserError(f"format=onnx needs {', '.join(missing)}: {EXPORT_EXTRA}")


def write(fmt: str, module: nn.Module, example: torch.Tensor | tuple[torch.Tensor, ...],
          path: Path, metadata: dict[str, Any] | None = None,
          names: list[str] | None = None) -> None:
    """Write `module` (traced/exported on `example`, batch size dynamic, input dtype that of
    `example`) to `path`, with `metadata` (see `METADATA_KEY`). A tuple example holds every
    input, named by `names` (`INPUTS`): a recurrent policy's `state` makes the outputs
    `action`, `state_out`."""
    example = example if isinstance(example, tuple) else (example,)
    names = names or INPUTS[:len(example)]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(metadata or {}, sort_keys=True)
    # traced as evaluation runs it (BatchNorm's running statistics, no Dropout); the caller's
    # module is handed back in its own mode
    with eval_mode(module):
        if fmt == "onnx":
            _write_onnx(module, example, names, path)
        else:
            _write_torchscript(module, example, path, text)
    if fmt == "onnx":
        # optional extra: ONNX, for format=onnx only (`pip install "rltrain[export]"`)
        import onnx

        model = onnx.load(str(path))
        entry = model.metadata_props.add()
        entry.key, entry.value = METADATA_KEY, text
        onnx.save(model, str(path))


def _write_torchscript(module: nn.Module, example: tuple[torch.Tensor, ...], path: Path,
                       text: str) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        # torch's RNN modules check their input sizes in Python: fixed by the trace, fine
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning,
                                module=r"torch\.nn\.modules\.rnn")
        traced = torch.jit.trace(module, example)
        torch.jit.save(traced, str(path), _extra_files={f"{METADATA_KEY}.json": text})


def read_metadata(fmt: str, path: Path) -> dict[str, Any]:
    """The `METADATA_KEY` metadata `write` stored in an export ({} when there is none)."""
    if fmt == "onnx":
        # optional extra: ONNX, for format=onnx only (`pip install "rltrain[export]"`)
        import onnx

        props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
        return json.loads(props.get(METADATA_KEY, "{}"))
    files = {f"{METADATA_KEY}.json": ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        torch.jit.load(str(path), map_location="cpu", _extra_files=files)
    return json.loads(files[f"{METADATA_KEY}.json"] or "{}")


def _write_onnx(module: nn.Module, example: tuple[torch.Tensor, ...], names: list[str],
                path: Path) -> None:
    # torch 2.13's exporter logs a warning per torchvision op it cannot register and raises a
    # FutureWarning from its own pytree code; the graph optimizers of onnxscript and onnx_ir log
    # each pass at INFO ("Removed 5 unused nodes"), which a process with an INFO root logger
    # (after `rltrain.train()`) printed. None concerns the user: all stay quiet here.
    quiet = {"torch.onnx._internal.exporter._registration": logging.ERROR,
             "onnxscript": logging.WARNING, "onnx_ir": logging.WARNING}
    levels = {name: logging.getLogger(name).level for name in quiet}
    for name, level in quiet.items():
        logging.getLogger(name).setLevel(level)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*LeafSpec.*", FutureWarning)
            # torch's own LSTM/GRU decomposition, when a recurrent policy is exported
            warnings.filterwarnings("ignore", r".*_check_is_size.*", FutureWarning)
            warnings.filterwarnings("ignore", r".*_flat_weights.*assigned during export.*")
            warnings.filterwarnings("ignore", r".*axis name: batch will not be used.*")
            batch = torch.export.Dim("batch")
            recurrent = "state" in names  # the state's batch is its dim 1
            torch.onnx.export(module, example, str(path), input_names=names,
                              output_names=["action", "state_out"] if recurrent else ["action"],
                              dynamo=True, external_data=False,
                              dynamic_shapes=_dynamic_shapes(names, batch),
                              verbose=False)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _dynamic_shapes(names: list[str], batch: Any) -> tuple[Any, ...]:
    """The batch dims of `forward(*inputs)`: dim 0 of each input but the recurrent state,
    whose batch is its dim 1."""
    return (tuple({1 if n == "state" else 0: batch} for n in names),)


def load(fmt: str, path: Path) -> Runner:
    """Reload a written export the way a user would: ONNX Runtime, or `torch.jit.load`."""
    if fmt == "onnx":
        # optional extra: ONNX Runtime, for format=onnx only (`pip install "rltrain[export]"`)
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        names = [i.name for i in session.get_inputs()]

        def run_onnx(obs: Any, *extra: np.ndarray) -> Any:
            feed = {name: _as_input(name, value) for name, value in zip(
                names, (*_obs_inputs(obs), *extra), strict=True)}
            out = session.run(None, feed)
            return out[0] if len(out) == 1 else tuple(out)

        return run_onnx
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        scripted = torch.jit.load(str(path), map_location="cpu")

    names = read_metadata(fmt, path).get("inputs") or INPUTS[:1]

    def run(obs: Any, *extra: np.ndarray) -> Any:
        inputs = [torch.as_tensor(_as_input(n, v)) for n, v in zip(
            names, (*_obs_inputs(obs), *extra), strict=True)]
        with torch.no_grad():
            out = scripted(*inputs)
        return out.numpy() if isinstance(out, torch.Tensor) else tuple(o.numpy() for o in out)

    return run


def _obs_inputs(obs: np.ndarray | dict[str, np.ndarray]) -> list[np.ndarray]:
    """The observation inputs: one array, or a Dict observation's entries in their order."""
    return list(obs.values()) if isinstance(obs, dict) else [obs]


def _as_input(name: str, value: np.ndarray) -> np.ndarray:
    """An input in the dtype the export takes: obs float32 (uint8 pixels and int64 categorical
    entries as they are), the
    recurrent state float32, the action mask bool."""
    if name == "action_mask":
        return np.asarray(value, dtype=np.bool_)
    if name == "state":
        return np.asarray(value, dtype=np.float32)
    return np.asarray(value, _input_dtype(value))


def _input_dtype(obs: np.ndarray) -> type:
    """uint8 and int64 observations go in as they are (pixel policies take uint8, categorical
    ones int64); others as float32."""
    dtype = np.asarray(obs).dtype
    return dtype.type if dtype in (np.uint8, np.int64) else np.float32
