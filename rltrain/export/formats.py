"""Writing and reloading the two export formats: ONNX (`rltrain[export]`) and TorchScript.

ONNX uses torch's default exporter (`torch.onnx.export(dynamo=True)`, which needs `onnxscript`);
the older TorchScript-based one (`dynamo=False`) still works offline in torch 2.13 but warns
that it will be removed. TorchScript is `torch.jit.trace`, built into torch; torch 2.13 marks
`torch.jit` deprecated (a `DeprecationWarning`) in favour of `torch.export`, but it works.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rltrain.errors import UserError

FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export format → default file name under `<run>/export/`."""
EXPORT_EXTRA = 'pip install "rltrain[export]"'
Runner = Callable[[np.ndarray], np.ndarray]
"""A loaded export: float32 observations `[B, *obs_shape]` → actions as numpy."""


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


def write(fmt: str, module: nn.Module, example: torch.Tensor, path: Path) -> None:
    """Write `module` (traced/exported on `example`, batch size dynamic) to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    if fmt == "onnx":
        _write_onnx(module, example, path)
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
            traced = torch.jit.trace(module, (example,))
            torch.jit.save(traced, str(path))


def _write_onnx(module: nn.Module, example: torch.Tensor, path: Path) -> None:
    # torch 2.13's exporter logs a warning per torchvision op it cannot register and raises a
    # FutureWarning from its own pytree code; neither concerns the user, so both stay quiet here.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*LeafSpec.*", FutureWarning)
            torch.onnx.export(module, (example,), str(path), input_names=["obs"],
                              output_names=["action"], dynamo=True, external_data=False,
                              dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
                              verbose=False)
    finally:
        registration.setLevel(level)


def load(fmt: str, path: Path) -> Runner:
    """Reload a written export the way a user would: ONNX Runtime, or `torch.jit.load`."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda obs: session.run(None, {"obs": np.asarray(obs, np.float32)})[0]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", DeprecationWarning)
        scripted = torch.jit.load(str(path), map_location="cpu")

    def run(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return scripted(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    return run
