"""What a cost profile must hold: every constant, its unit, and where its value comes from.

A profile (``sim/profiles/*.toml``) has one table per constant under
``[constants]``::

    [constants.memcpy_bytes_per_s]
    value = 1.69e10
    unit = "bytes/s"            # any unit of the constant's dimension (GB/s, ms, us/token, ...)
    source = "measured"         # measured | published | assumption
    how = "np.copyto of 64 MiB, median of 7"
    machine = "..."             # measured only: where
    spread = [1.2e10, 2.2e10]   # measured only: min and max over the repeats, in ``unit``
    repeats = 7                 # measured only

or a reference to the same constant in another profile, ``{ from = "calibrated-here" }``:
the GPU-class profile takes its host-side constants from calibration that way, so a
new ``deferlab calibrate`` run is the single place they change. Why so strict: a
simulator constant is only worth its label, and the label must say how to check it.
Nothing here may be fitted to the PR's numbers (sim.anchors compares against them).
"""

from __future__ import annotations

import json
import math
from typing import Any

from deferlab.reference.system.errors import ProfileError

SOURCES = ("measured", "published", "assumption")

_PER = ("pixel", "element", "patch", "token")
UNITS: dict[str, dict[str, float]] = {
    "rate": {
        "bytes/s": 1.0,
        "B/s": 1.0,
        "kB/s": 1e3,
        "MB/s": 1e6,
        "GB/s": 1e9,
        "TB/s": 1e12,
        "KiB/s": 2.0**10,
        "MiB/s": 2.0**20,
        "GiB/s": 2.0**30,
    },
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12},
    "bytes_per_token": {"bytes/token": 1.0, "B/token": 1.0, "KiB/token": 2.0**10},
    "tokens": {"tokens": 1.0},
}
for _what in _PER:
    UNITS[f"time_per_{_what}"] = {f"{p}/{_what}": f for p, f in UNITS["time"].items()}

# name -> (dimension, side). "host" constants are the ones `deferlab calibrate` measures on the CPU host.
CONSTANTS: dict[str, tuple[str, str]] = {
    # host: measured by sim/calibrate/run.py (real operations)
    "memcpy_bytes_per_s": ("rate", "host"),
    "stage_bytes_per_s": ("rate", "host"),
    "cpu_hash_bytes_per_s": ("rate", "host"),
    "cpu_preprocess_s_per_pixel": ("time_per_pixel", "host"),
    "shm_write_bytes_per_s": ("rate", "host"),
    "shm_item_s": ("time", "host"),
    "shm_attach_s": ("time", "host"),
    "shm_read_bytes_per_s": ("rate", "host"),
    "pickle_fp32_bytes_per_s": ("rate", "host"),
    "pickle_uint8_bytes_per_s": ("rate", "host"),
    "unpickle_fp32_bytes_per_s": ("rate", "host"),
    "unpickle_uint8_bytes_per_s": ("rate", "host"),
    "pickle_item_s": ("time", "host"),
    "unpickle_item_s": ("time", "host"),
    "socket_bytes_per_s": ("rate", "host"),
    "socket_latency_s": ("time", "host"),
    "bcast_bytes_per_s_w2": ("rate", "host"),
    "bcast_bytes_per_s_w4": ("rate", "host"),
    "bcast_bytes_per_s_w8": ("rate", "host"),
    "bcast_latency_s_w2": ("time", "host"),
    "bcast_latency_s_w4": ("time", "host"),
    "bcast_latency_s_w8": ("time", "host"),
    # device and links
    "h2d_bytes_per_s": ("rate", "device"),
    "d2h_bytes_per_s": ("rate", "device"),
    "allgather_bytes_per_s": ("rate", "device"),
    "allgather_latency_s": ("time", "device"),
    "hbm_bytes_per_s": ("rate", "device"),
    "preprocess_s_per_element": ("time_per_element", "device"),
    "preprocess_fixed_s": ("time", "device"),
    "gpu_hash_bytes_per_s": ("rate", "device"),
    "vit_s_per_patch": ("time_per_patch", "device"),
    "vision_hidden_bytes_per_token": ("bytes_per_token", "device"),
    "prefill_gpu_s_per_token": ("time_per_token", "device"),
    "embedding_hidden_bytes_per_token": ("bytes_per_token", "device"),
    "prefill_token_budget": ("tokens", "device"),
    # serving-loop overheads
    "fixed_s_per_request": ("time", "loop"),
    "sched_s_per_iteration": ("time", "loop"),
}
HOST_CONSTANTS = tuple(k for k, (_, side) in CONSTANTS.items() if side == "host")
BCAST_WORLDS = (2, 4, 8)

_REQUIRED = {
    "measured": ("value", "unit", "source", "how", "machine", "spread", "repeats"),
    "published": ("value", "unit", "source", "how"),
    "assumption": ("value", "unit", "source", "how"),
}
_OPTIONAL = ("note",)


def check_constant(name: str, table: Any, where: str) -> dict[str, Any]:
    """Validate one constant's table; return it with ``value``/``spread`` in the canonical unit.

    Every error is a `ProfileError` naming ``where`` (the file) and the constant.
    """
    if name not in CONSTANTS:
        raise ProfileError(f"{where}: unknown constant {name!r}; accepted: {sorted(CONSTANTS)}")
    if not isinstance(table, dict):
        raise ProfileError(
            f"{where}: constant {name!r} must be a table {{value, unit, source, how, ...}}, got {table!r}"
        )
    unit = table.get("unit")
    units = UNITS[CONSTANTS[name][0]]
    if unit not in units:
        raise ProfileError(f"{where}: constant {name!r}: unit {unit!r} is not known; accepted: {list(units)}")
    source = table.get("source")
    if source not in SOURCES:
        raise ProfileError(
            f"{where}: constant {name!r}: source = {source!r} is not accepted; accepted: {list(SOURCES)}"
        )
    missing = [k for k in _REQUIRED[source] if k not in table]
    if missing:
        raise ProfileError(f"{where}: constant {name!r} ({source}) lacks {missing}")
    extra = sorted(set(table) - set(_REQUIRED["measured"]) - set(_OPTIONAL))
    if extra:
        raise ProfileError(
            f"{where}: constant {name!r}: unknown key(s) {extra}; accepted: {list(_REQUIRED['measured'] + _OPTIONAL)}"
        )
    factor = units[unit]
    value = table["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ProfileError(f"{where}: constant {name!r}: value must be a finite number >= 0, got {value!r}")
    if CONSTANTS[name][0] == "rate" and value == 0:
        raise ProfileError(f"{where}: constant {name!r} is a rate and must be > 0")
    out = dict(table)
    out["value"] = float(value) * factor
    out["unit_given"] = unit
    if source == "measured":
        spread = table["spread"]
        if (
            not isinstance(spread, list)
            or len(spread) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in spread)
        ):
            raise ProfileError(f"{where}: constant {name!r}: spread must be [min, max] in {unit!r}, got {spread!r}")
        out["spread"] = [float(v) * factor for v in spread]
        reps = table["repeats"]
        if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
            raise ProfileError(f"{where}: constant {name!r}: repeats must be an int >= 1, got {reps!r}")
    return out


def is_reference(table: Any) -> bool:
    """A ``{ from = "other-profile" }`` table (optionally with a ``note``)."""
    return isinstance(table, dict) and "from" in table and set(table) <= {"from", "note"}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ProfileError(f"cannot write a non-finite number {v!r} to a profile")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ProfileError(f"cannot write {type(v).__name__} {v!r} to a profile")


def _toml_table(header: str, table: dict[str, Any], out: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    out.append(f"[{header}]")
    out += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    out.append("")
    for k, v in table.items():
        if isinstance(v, dict):
            _toml_table(f"{header}.{json.dumps(k) if not k.replace('_', '').replace('-', '').isalnum() else k}", v, out)


def dump_profile(
    meta: dict[str, Any], constants: dict[str, dict[str, Any]], observations: dict[str, Any], notes: list[str]
) -> str:
    """A profile as TOML text (what ``deferlab calibrate`` writes); ``notes`` become leading comments."""
    out = ["# Cost profile written by `deferlab calibrate` (format: sim/profile_schema.py).", ""]
    out += [f"# {line}" for line in notes]
    if notes:
        out.append("")
    _toml_table("meta", meta, out)
    for name, table in constants.items():
        _toml_table(f"constants.{name}", table, out)
    if observations:
        _toml_table("observations", observations, out)
    return "\n".join(out).rstrip() + "\n"
