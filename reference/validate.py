"""Front-door checks shared by the reference's public functions.

Every public entry point validates its inputs here *before* any work, so a bad
value fails with one message shape: which input, what is wrong with it, and
what is accepted. The helpers return the normalised value so callers can write
``x = check_float_image("x", x)`` and move on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ARITHMETICS = ("cpu", "cuda")


def type_name(value: Any) -> str:
    """A short, readable type name for error messages."""
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def as_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array: arrays pass through, torch-like tensors are read via ``.numpy()``.

    The reference never imports torch; a tensor is recognised by duck typing
    (``detach``/``cpu``/``numpy`` methods), so properties can hand the same
    object to ``impl`` and to the oracle.
    """
    if isinstance(value, np.ndarray):
        return value
    if all(callable(getattr(value, attr, None)) for attr in ("detach", "cpu", "numpy")):
        return value.detach().cpu().numpy()
    raise TypeError(f"{name} must be a NumPy array or a tensor, got {type_name(value)}")


def is_tensor_like(value: Any) -> bool:
    """True for torch-like tensors (duck-typed, so torch is never imported here)."""
    return all(callable(getattr(value, attr, None)) for attr in ("detach", "cpu", "numpy"))


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int, got {value!r} (type {type_name(value)})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def check_arithmetic(value: Any) -> str:
    """The device arithmetic a composite models: ``"cpu"`` (true division) or ``"cuda"`` (reciprocal)."""
    if value not in ARITHMETICS:
        raise ValueError(f"arithmetic must be one of {ARITHMETICS}, got {value!r}")
    return value


def check_float_image(name: str, x: Any, *, channels: Sequence[int] | None = None) -> np.ndarray:
    """A (C,H,W) or (B,C,H,W) real-valued array; returns it as an ndarray (not copied)."""
    arr = as_array(name, x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers (uint8 or float), got dtype {arr.dtype}")
    if arr.ndim not in (3, 4):
        raise ValueError(f"{name} must be (C, H, W) or (B, C, H, W), got shape {arr.shape}")
    if channels is not None and arr.shape[-3] not in channels:
        raise ValueError(f"{name} must have {' or '.join(map(str, channels))} channels, got shape {arr.shape}")
    return arr
