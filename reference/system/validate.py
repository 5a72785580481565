"""The one home of deferlab's front-door checks: every public entry point validates here, before any work.

Why one module: the same input (a positive int, a choice from a list, a
table's keys) must be accepted or refused the same way whether it arrives
through the Python API, a config JSON, a scenario TOML or the command line,
with one message shape: which input, what is wrong with it, what is
accepted. Every helper returns the normalised value (``x = check_int("x",
x)``) and raises only the `reference.system.errors` family (subclasses of
`ValueError` / `TypeError`, so existing ``except`` clauses keep working).

Integers: Python ints and NumPy integer scalars are accepted (``np.int64(14)``
is 14), bools and floats are not (``True`` is not a patch size, ``14.0``
hides a computation gone wrong).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from deferlab.reference.system.errors import InputTypeError, InputValueError

ARITHMETICS = ("cpu", "cuda")
_T = TypeVar("_T")


def type_name(value: Any) -> str:
    """A short, readable type name for error messages."""
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def is_tensor_like(value: Any) -> bool:
    """True for torch-like tensors (duck-typed, so torch is never imported here)."""
    return all(callable(getattr(value, attr, None)) for attr in ("detach", "cpu", "numpy"))


def as_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array: arrays pass through, torch-like tensors are read via ``.numpy()``.

    The reference never imports torch; a tensor is recognised by duck typing,
    so properties can hand the same object to ``impl`` and to the oracle.
    """
    if isinstance(value, np.ndarray):
        return value
    if is_tensor_like(value):
        return value.detach().cpu().numpy()
    raise InputTypeError(f"{name} must be a NumPy array or a tensor, got {type_name(value)}")


def is_int(value: Any) -> bool:
    """A Python or NumPy integer, and not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An int (Python or NumPy) within ``[minimum, maximum]``; returned as a Python int."""
    if not is_int(value):
        bounds = _bounds_text(minimum, maximum)
        raise InputTypeError(f"{name} must be an int{bounds}, got {value!r} (type {type_name(value)})")
    v = int(value)
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        raise InputValueError(f"{name} must be an int{_bounds_text(minimum, maximum)}, got {v!r}")
    return v


def check_positive_int(name: str, value: Any) -> int:
    """An int >= 1 (sizes, counts, limits)."""
    return check_int(name, value, minimum=1)


def check_optional_positive_int(name: str, value: Any) -> int | None:
    """None, or an int >= 1."""
    return None if value is None else check_positive_int(name, value)


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> float:
    """A finite real number (int or float, NumPy scalars too, not bool) within bounds; returned as float.

    The message is built only on failure: the simulator checks every load it places, per request."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        bounds = _number_bounds_text(minimum, maximum, exclusive_minimum)
        raise InputTypeError(f"{name} must be a number{bounds}, got {value!r} (type {type_name(value)})")
    v = float(value)
    if not math.isfinite(v):
        bounds = _number_bounds_text(minimum, maximum, exclusive_minimum)
        raise InputValueError(f"{name} must be a finite number{bounds}, got {value!r}")
    too_low = minimum is not None and (v <= minimum if exclusive_minimum else v < minimum)
    if too_low or (maximum is not None and v > maximum):
        bounds = _number_bounds_text(minimum, maximum, exclusive_minimum)
        raise InputValueError(f"{name} must be a number{bounds}, got {value!r}")
    return v


def _number_bounds_text(minimum: float | None, maximum: float | None, exclusive_minimum: bool) -> str:
    lo = None if minimum is None else (">" if exclusive_minimum else ">=") + f" {minimum:g}"
    hi = None if maximum is None else f"<= {maximum:g}"
    return "" if not (lo or hi) else " " + " and ".join(b for b in (lo, hi) if b)


def check_bool(name: str, value: Any) -> bool:
    """Exactly True or False (1 and 'yes' are refused: a flag spelled otherwise is a typo)."""
    if not isinstance(value, bool | np.bool_):
        raise InputTypeError(f"{name} must be a bool (true or false), got {value!r} (type {type_name(value)})")
    return bool(value)


def check_str(name: str, value: Any) -> str:
    """A non-empty str."""
    if not isinstance(value, str):
        raise InputTypeError(f"{name} must be a str, got {value!r} (type {type_name(value)})")
    if not value:
        raise InputValueError(f"{name} must be a non-empty str")
    return value


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """One of ``choices`` (compared with ==); the message lists them all."""
    options = tuple(choices)
    if value not in options:
        raise InputValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def check_vector3(name: str, value: Any, *, positive: bool = False) -> tuple[float, float, float]:
    """Three finite floats (one per RGB channel), e.g. ``image_mean`` / ``image_std``; NumPy scalars allowed."""
    if isinstance(value, str | bytes) or not (isinstance(value, Sequence) or hasattr(value, "__array__")):
        raise InputTypeError(f"{name} must be a sequence of 3 floats, got {value!r}")
    if len(value) != 3:
        raise InputValueError(f"{name} must have exactly 3 values (one per RGB channel), got {len(value)}: {value!r}")
    out = tuple(
        check_number(f"{name}[{i}]", v, minimum=0.0 if positive else None, exclusive_minimum=positive)
        for i, v in enumerate(value)
    )
    return (out[0], out[1], out[2])


def check_level(name: str, value: Any) -> int:
    """An integer pixel level 0..255 (an integral float such as 255.0 is accepted, as checkpoints write it)."""
    if isinstance(value, float | np.floating) and math.isfinite(value) and value == int(value):
        value = int(value)
    return check_int(name, value, minimum=0, maximum=255)


def check_image_size(name: str, width: int, height: int, max_pixels: int | None, setting: str = "max_pixels") -> None:
    """Refuse an empty image, or one of more than ``max_pixels`` pixels (None: no cap), before any pixel work;
    ``setting`` names the cap as the caller's user sets it (``config.max_pixels``)."""
    if width <= 0 or height <= 0:
        raise InputValueError(f"{name} is empty ({width}x{height}); accepted: an image with at least one pixel")
    if max_pixels is not None and width * height > max_pixels:
        raise InputValueError(
            f"{name} has {width * height} pixels ({width}x{height}), over {setting}={max_pixels}; "
            "accepted: at most max_pixels (raise PreprocessConfig.max_pixels, or set it to None)"
        )


def check_arithmetic(value: Any) -> str:
    """The device arithmetic a composite models: ``"cpu"`` (true division) or ``"cuda"`` (reciprocal)."""
    return check_choice("arithmetic", value, ARITHMETICS)


def check_mapping(name: str, value: Any) -> Mapping[str, Any]:
    """A dict-like table (a JSON object, a TOML table)."""
    if not isinstance(value, Mapping):
        raise InputTypeError(f"{name} must be a table (dict), got {type_name(value)}")
    return value


def check_instance(name: str, value: Any, kind: type[_T], source: str) -> _T:
    """``value`` when it is a ``kind`` (``source`` says where one comes from); else one InputTypeError."""
    if not isinstance(value, kind):
        article = "an" if kind.__name__[:1] in "AEIOU" else "a"
        raise InputTypeError(f"{name} must be {article} {kind.__name__} ({source}), got {type_name(value)}")
    return value


def check_keys(
    name: str,
    table: Mapping[str, Any],
    *,
    required: Iterable[str] = (),
    allowed: Iterable[str] | None = None,
) -> None:
    """Every required key is present and, when ``allowed`` is given, no other key is (a typo is named)."""
    required = tuple(required)
    missing = [k for k in required if k not in table]
    if missing:
        raise InputValueError(f"{name} is missing {missing}; it has {sorted(table)} (required: {list(required)})")
    if allowed is not None:
        ok = set(allowed) | set(required)
        unknown = sorted(set(table) - ok)
        if unknown:
            raise InputValueError(f"{name} has unknown key(s) {unknown}; accepted: {sorted(ok)}")


def check_float_image(name: str, x: Any, *, channels: Sequence[int] | None = None) -> np.ndarray:
    """A (C,H,W) or (B,C,H,W) real-valued array; returns it as an ndarray (not copied)."""
    arr = as_array(name, x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise InputTypeError(f"{name} must hold real numbers (uint8 or float), got dtype {arr.dtype}")
    if arr.ndim not in (3, 4):
        raise InputValueError(f"{name} must be (C, H, W) or (B, C, H, W), got shape {arr.shape}")
    if channels is not None and arr.shape[-3] not in channels:
        raise InputValueError(f"{name} must have {' or '.join(map(str, channels))} channels, got shape {arr.shape}")
    return arr


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in {minimum}..{maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""
