"""The latency model's constants and the per-operation costs built from them.

Constants live in ``sim/profiles/*.toml``, each with its unit and source
(`sim.profile_schema`), so a reader can see which number drives which result.
Two profiles ship: ``gb300-class`` (published GPU figures, host constants taken
from calibration) and ``calibrated-here`` (written by ``deferlab calibrate`` on
this testbed, whose CPU stands in for the preprocessing device). Costs are
vectorized over NumPy arrays: the DES precomputes every request's service times
in one pass and the event loops only add them up.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.reference.system.errors import ProfileError
from deferlab.sim.profile_schema import BCAST_WORLDS, CONSTANTS, check_constant, is_reference

PROFILES_DIR = Path(__file__).parent / "profiles"
GPU_CLASS_PROFILE = "gb300-class"  # published GPU figures; what calibration cannot measure refers to it
CALIBRATED_PROFILE = "calibrated-here"  # what `deferlab calibrate` names the profile it writes
DEFAULT_COST_PROFILE = GPU_CLASS_PROFILE
_SECTIONS = ("meta", "constants", "observations")


@dataclass(frozen=True)
class CostModel:
    """Seconds per byte / pixel / element / patch / token (canonical units); provenance per constant."""

    memcpy_bytes_per_s: float
    stage_bytes_per_s: float
    cpu_hash_bytes_per_s: float
    cpu_preprocess_s_per_pixel: float
    shm_write_bytes_per_s: float
    shm_item_s: float
    shm_attach_s: float
    shm_read_bytes_per_s: float
    pickle_fp32_bytes_per_s: float
    pickle_uint8_bytes_per_s: float
    unpickle_fp32_bytes_per_s: float
    unpickle_uint8_bytes_per_s: float
    pickle_item_s: float
    unpickle_item_s: float
    socket_bytes_per_s: float
    socket_latency_s: float
    bcast_bytes_per_s_w2: float
    bcast_bytes_per_s_w4: float
    bcast_bytes_per_s_w8: float
    bcast_latency_s_w2: float
    bcast_latency_s_w4: float
    bcast_latency_s_w8: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    allgather_bytes_per_s: float
    allgather_latency_s: float
    hbm_bytes_per_s: float
    preprocess_s_per_element: float
    preprocess_fixed_s: float
    gpu_hash_bytes_per_s: float
    vit_s_per_patch: float
    vision_hidden_bytes_per_token: float
    prefill_gpu_s_per_token: float
    embedding_hidden_bytes_per_token: float
    prefill_token_budget: float
    fixed_s_per_request: float
    sched_s_per_iteration: float
    name: str = "custom"
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)
    observations: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def decode_on_gpu(self) -> bool:
        """Whether this profile's device decodes JPEGs (nvJPEG, the K3 processor's default); ``[meta] decode``."""
        return self.meta.get("decode", "gpu") == "gpu"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name not in CONSTANTS:
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise ProfileError(f"cost model {self.name!r}: {f.name} must be a finite number >= 0, got {v!r}")
            if CONSTANTS[f.name][0] == "rate" and v == 0:
                raise ProfileError(f"cost model {self.name!r}: {f.name} is a rate and must be > 0")
        if self.prefill_token_budget < 1:
            raise ProfileError(f"cost model {self.name!r}: prefill_token_budget must be >= 1 token")

    def constants(self) -> dict[str, float]:
        """Every constant's value in its canonical unit."""
        return {k: getattr(self, k) for k in CONSTANTS}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.constants()}

    # ---- host operations (vectorized) -----------------------------------------------------
    def memcpy(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        """A host copy: ``bytes(tensor.numpy())`` after a broadcast, a clone."""
        return nbytes / self.memcpy_bytes_per_s

    def pickle(self, fp32: np.ndarray | float, uint8: np.ndarray | float, items: np.ndarray | float) -> Any:
        """``pickle.dumps`` of items carrying ``fp32`` / ``uint8`` tensor bytes, plus a fixed cost per item."""
        return fp32 / self.pickle_fp32_bytes_per_s + uint8 / self.pickle_uint8_bytes_per_s + items * self.pickle_item_s

    def unpickle(self, fp32: np.ndarray | float, uint8: np.ndarray | float, items: np.ndarray | float) -> Any:
        """``pickle.loads`` of the same."""
        return (
            fp32 / self.unpickle_fp32_bytes_per_s
            + uint8 / self.unpickle_uint8_bytes_per_s
            + items * self.unpickle_item_s
        )

    def shm_write(self, nbytes: np.ndarray | float, items: np.ndarray | float) -> Any:
        """``ShmPointerMMData``: create a segment per item, reserve it, copy the tensor in."""
        return nbytes / self.shm_write_bytes_per_s + items * self.shm_item_s

    def socket(self, nbytes: np.ndarray | float) -> Any:
        """One message over the local tokenizer -> scheduler socket."""
        return self.socket_latency_s + nbytes / self.socket_bytes_per_s

    def bcast(self, nbytes: float, world: int) -> float:
        """One gloo broadcast of ``nbytes`` to ``world`` ranks (size, then data; a barrier's latency).

        Measured at worlds 2, 4 and 8; other sizes interpolate linearly in the
        number of peers (world - 1), and beyond 8 scale the world-8 cost by
        (world - 1) / 7, as the root sends to each peer in turn.
        """
        if world <= 1:
            return 0.0
        pts = [
            (w, getattr(self, f"bcast_latency_s_w{w}") + nbytes / getattr(self, f"bcast_bytes_per_s_w{w}"))
            for w in BCAST_WORLDS
        ]
        if world >= pts[-1][0]:
            return pts[-1][1] * (world - 1) / (pts[-1][0] - 1)
        for (w0, t0), (w1, t1) in zip(pts, pts[1:], strict=False):
            if w0 <= world <= w1:
                return t0 + (t1 - t0) * (world - w0) / (w1 - w0)
        return pts[0][1]

    def cpu_preprocess(self, pixels: np.ndarray | float) -> np.ndarray | float:
        return pixels * self.cpu_preprocess_s_per_pixel

    # ---- device operations ---------------------------------------------------------------
    def h2d(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        return nbytes / self.h2d_bytes_per_s

    def d2h(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        return nbytes / self.d2h_bytes_per_s

    def gpu_preprocess(self, elements: np.ndarray | float, calls: np.ndarray | float) -> np.ndarray | float:
        """Resize / composite / normalize / patchify on the device: per element, plus a fixed cost per call."""
        return elements * self.preprocess_s_per_element + calls * self.preprocess_fixed_s

    def vit(self, patches: np.ndarray | float) -> np.ndarray | float:
        return patches * self.vit_s_per_patch

    def allgather(self, padded_tokens_per_rank: np.ndarray | float, ranks: int) -> np.ndarray | float:
        """One all-gather of ``ranks`` equal (padded) slices; zero with one rank."""
        if ranks <= 1:
            return padded_tokens_per_rank * 0.0
        volume = padded_tokens_per_rank * (ranks - 1) * self.vision_hidden_bytes_per_token
        return volume / self.allgather_bytes_per_s + self.allgather_latency_s

    def prefill(self, tokens: np.ndarray | float, ranks: int) -> np.ndarray | float:
        return tokens * self.prefill_gpu_s_per_token / max(ranks, 1)


def profile_path(name_or_path: str | Path) -> Path:
    """``sim/profiles/<name>.toml`` for a shipped name, else the path itself; missing: ProfileError listing them."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = PROFILES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))
        raise ProfileError(f"cost profile {str(path)!r} does not exist; shipped profiles: {known}")
    return path


_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}


def _read(path: Path) -> dict[str, Any]:
    """The parsed profile, cached by (path, mtime, size): ``from`` references re-read a file per constant."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = _parse(path)
    return _PARSED[key]


def _parse(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"cost profile {str(path)!r} is not valid TOML: {e}") from None
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise ProfileError(f"cost profile {str(path)!r}: unknown section(s) {unknown}; accepted: {list(_SECTIONS)}")
    if not isinstance(data.get("constants"), dict):
        raise ProfileError(f"cost profile {str(path)!r}: no [constants] table")
    return data


def _resolve(name: str, path: Path, seen: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """One constant's checked table, following ``from`` references to other profiles (cycles refused)."""
    table = _read(path)["constants"].get(name)
    where = f"cost profile {str(path)!r}"
    if table is None:
        raise ProfileError(f"{where}: constant {name!r} is missing")
    if is_reference(table):
        key = (str(path.resolve()), name)
        if key in seen:
            raise ProfileError(f"{where}: constant {name!r} refers back to itself through {table['from']!r}")
        target = profile_path(table["from"])
        out = dict(_resolve(name, target, (*seen, key)))
        out["via"] = str(table["from"])
        return out
    return check_constant(name, table, where)


def load_cost_model(name_or_path: str | Path = DEFAULT_COST_PROFILE) -> CostModel:
    """Read a cost profile by name (``sim/profiles/<name>.toml``) or path.

    Every constant of `sim.profile_schema.CONSTANTS` must be present (or refer
    to a profile that has it) with a known unit; otherwise a `ProfileError`
    names the file and the constant.
    """
    path = profile_path(name_or_path)
    data = _read(path)
    consts = data["constants"]
    unknown = sorted(set(consts) - set(CONSTANTS))
    if unknown:
        raise ProfileError(f"cost profile {str(path)!r}: unknown constant(s) {unknown}; accepted: {sorted(CONSTANTS)}")
    missing = [k for k in CONSTANTS if k not in consts]
    if missing:
        raise ProfileError(
            f"cost profile {str(path)!r}: constant {missing[0]!r} is missing"
            + (f" (and {len(missing) - 1} more: {missing[1:]})" if len(missing) > 1 else "")
        )
    provenance = {k: _resolve(k, path, ()) for k in CONSTANTS}
    values = {k: p["value"] for k, p in provenance.items()}
    meta = data.get("meta", {})
    if meta.get("decode", "gpu") not in ("gpu", "cpu"):
        raise ProfileError(f"cost profile {str(path)!r}: [meta] decode = {meta['decode']!r}; accepted: 'gpu', 'cpu'")
    return CostModel(
        name=str(meta.get("name", path.stem)),
        provenance=provenance,
        observations=dict(data.get("observations", {})),
        meta=dict(meta),
        **values,
    )


def shipped_profiles() -> list[str]:
    """Names of the shipped cost profiles, the GPU-class default first."""
    names = sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))
    return sorted(names, key=lambda n: n != DEFAULT_COST_PROFILE)
