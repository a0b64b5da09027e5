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

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export format → default file name under `<run>/export/`."""
EXPORT_EXTRA = 'pip install "rltrain[export]"'
Runner = Callable[..., Any]
"""A loaded export: observations `[B, *obs_shape]` (float32, or uint8 for pixel policies) →
actions as numpy; a recurrent one takes (obs, state `[L, B, D]`) and returns (actions, state)."""
INPUTS = ["obs", "state"]
"""Input names of an export: `obs`, and `state` for a recurrent policy."""
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
          path: Path, metadata: dict[str, Any] | None = None) -> None:
    """Write `module` (traced/exported on `example`, batch size dynamic, input dtype that of
    `example`) to `path`, with `metadata` (see `METADATA_KEY`). A tuple `(obs, state)` is the
    example of a recurrent policy: inputs `obs`, `state`; outputs `action`, `state_out`."""
    example = example if isinstance(example, tuple) else (example,)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    text = json.dumps(metadata or {}, sort_keys=True)
    if fmt == "onnx":
        _write_onnx(module, example, path)
        import onnx

        model = onnx.load(str(path))
        entry = model.metadata_props.add()
        entry.key, entry.value = METADATA_KEY, text
        onnx.save(model, str(path))
    else:
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
        import onnx

        props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
        return json.loads(props.get(METADATA_KEY, "{}"))
    files = {f"{METADATA_KEY}.json": ""}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        torch.jit.load(str(path), map_location="cpu", _extra_files=files)
    return json.loads(files[f"{METADATA_KEY}.json"] or "{}")


def _write_onnx(module: nn.Module, example: tuple[torch.Tensor, ...], path: Path) -> None:
    # torch 2.13's exporter logs a warning per torchvision op it cannot register and raises a
    # FutureWarning from its own pytree code; neither concerns the user, so both stay quiet here.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*LeafSpec.*", FutureWarning)
            # torch's own LSTM/GRU decomposition, when a recurrent policy is exported
            warnings.filterwarnings("ignore", r".*_check_is_size.*", FutureWarning)
            warnings.filterwarnings("ignore", r".*_flat_weights.*assigned during export.*")
            warnings.filterwarnings("ignore", r".*axis name: batch will not be used.*")
            batch = torch.export.Dim("batch")
            recurrent = len(example) == 2  # (obs, state): the state's batch is its dim 1
            torch.onnx.export(module, example, str(path), input_names=INPUTS[:len(example)],
                              output_names=["action", "state_out"] if recurrent else ["action"],
                              dynamo=True, external_data=False,
                              dynamic_shapes=({"obs": {0: batch}, "state": {1: batch}}
                                              if recurrent else {"obs": {0: batch}}),
                              verbose=False)
    finally:
        registration.setLevel(level)


def load(fmt: str, path: Path) -> Runner:
    """Reload a written export the way a user would: ONNX Runtime, or `torch.jit.load`."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        def run_onnx(obs: np.ndarray, state: np.ndarray | None = None) -> Any:
            feed = {"obs": np.asarray(obs, _input_dtype(obs))}
            if state is not None:
                feed["state"] = np.asarray(state, np.float32)
            out = session.run(None, feed)
            return out[0] if state is None else (out[0], out[1])

        return run_onnx
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        scripted = torch.jit.load(str(path), map_location="cpu")

    def run(obs: np.ndarray, state: np.ndarray | None = None) -> Any:
        x = torch.as_tensor(obs, dtype=torch.float32 if _input_dtype(obs) == np.float32
                            else torch.uint8)
        with torch.no_grad():
            if state is None:
                return scripted(x).numpy()
            action, new_state = scripted(x, torch.as_tensor(state, dtype=torch.float32))
            return action.numpy(), new_state.numpy()

    return run


def _input_dtype(obs: np.ndarray) -> type:
    """uint8 observations go in as they are (pixel policies take uint8); others as float32."""
    return np.uint8 if np.asarray(obs).dtype == np.uint8 else np.float32
