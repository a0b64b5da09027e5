"""Reading checkpoints of rltrain 0.1, whose env snapshots could hold numpy scalars (issue 20).

LunarLander's `prev_shaping` is a `numpy.float64`; rltrain 0.1 pickled it as a numpy scalar,
which `torch.load(weights_only=True)` refuses. `NUMPY_SCALAR_GLOBALS` maps the two globals such
a scalar is pickled with to stand-ins of ours that build numeric values only, as Python numbers.
`rltrain.checkpoint.format.load` allows them for the duration of one `torch.load` (a context manager,
never `add_safe_globals` for the process). No numpy array, no object dtype and nothing that
names code is ever accepted.
"""

from __future__ import annotations

import pickle
import re
from typing import Any

import numpy as np

_DTYPE_NAME = re.compile(r"[<>|=]?[biuf][1248]")
"""numpy's pickled names of the numeric dtypes: `f8`, `i4`, `u1`, `b1` (bool) ..."""


class _NumericDtype:
    """Stands in for `numpy.dtype` while a checkpoint is read: only numeric dtypes are built
    (an object dtype or anything else stops the load)."""

    def __init__(self, name: Any, align: Any = False, copy: Any = True):
        if not isinstance(name, str) or not _DTYPE_NAME.fullmatch(name):
            raise pickle.UnpicklingError(f"numpy dtype {name!r} is not a numeric dtype")
        self.dtype = np.dtype(name)

    def __setstate__(self, state: Any) -> None:
        """numpy's dtype state `(version, byte order, ...)`: only the byte order is used."""
        order = state[1] if isinstance(state, tuple) and len(state) > 1 else None
        dtype = getattr(self, "dtype", None)  # None when built without __init__ (NEWOBJ)
        if dtype is None or order not in ("<", ">", "|", "="):
            raise pickle.UnpicklingError(f"malformed numpy dtype (byte order {order!r})")
        self.dtype = dtype.newbyteorder(order if order != "|" else "=")


def _numeric_scalar(dtype: Any, data: Any = None) -> bool | int | float:
    """A numpy scalar as the Python number it holds (`numpy.generic.item()`)."""
    np_dtype = getattr(dtype, "dtype", None) if isinstance(dtype, _NumericDtype) else None
    if np_dtype is None or not isinstance(data, bytes) or len(data) != np_dtype.itemsize:
        raise pickle.UnpicklingError("malformed numpy scalar")
    return np.frombuffer(data, dtype=np_dtype)[0].item()


NUMPY_SCALAR_GLOBALS = [(_NumericDtype, "numpy.dtype"),
                         (_numeric_scalar, "numpy._core.multiarray.scalar"),
                         (_numeric_scalar, "numpy.core.multiarray.scalar")]
"""The globals a numpy scalar pickles with (numpy 2 and 1 names), each mapped to a stand-in of
ours that builds only numeric values, and only while `load` reads a file (the allowlist is
never widened for the process). They read checkpoints of rltrain 0.1, whose env snapshot kept
LunarLander's numpy.float64 `prev_shaping`: the numbers load as Python numbers. Nothing that
names code, no numpy array and no object dtype is ever accepted."""
