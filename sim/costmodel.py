"""The latency model's constants and the per-operation costs built from them.

Constants live in ``sim/profiles/*.toml`` with their source (measured here,
published, or an assumption) so a reader can see which number drives which
result. Costs are vectorized over NumPy arrays: the DES precomputes every
request's service times in one pass and the event loop only adds them up.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

PROFILES_DIR = Path(__file__).parent / "profiles"
DEFAULT_COST_PROFILE = "gb300-class"


@dataclass(frozen=True)
class CostModel:
    """Seconds per byte / pixel / patch / token; see the profile file for each source."""

    memcpy_bytes_per_s: float
    pickle_bytes_per_s: float
    cpu_hash_bytes_per_s: float
    cpu_preprocess_s_per_pixel: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    allgather_bytes_per_s: float
    allgather_latency_s: float
    hbm_bytes_per_s: float
    preprocess_bytes_per_element: float
    preprocess_fixed_s: float
    gpu_hash_bytes_per_s: float
    vit_s_per_patch: float
    vision_hidden_bytes_per_token: float
    prefill_gpu_s_per_token: float
    embedding_hidden_bytes_per_token: float
    fixed_s_per_request: float
    name: str = "custom"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise ValueError(f"cost model {self.name!r}: {f.name} must be a finite number >= 0, got {v!r}")
            if f.name.endswith("_per_s") and v == 0:
                raise ValueError(f"cost model {self.name!r}: {f.name} is a bandwidth and must be > 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    # ---- per-operation costs (vectorized) -------------------------------------------------
    def memcpy(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        """A host copy: staging uint8 CHW, an shm write, an shm clone on a rank."""
        return nbytes / self.memcpy_bytes_per_s

    def h2d(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        return nbytes / self.h2d_bytes_per_s

    def d2h(self, nbytes: np.ndarray | float) -> np.ndarray | float:
        return nbytes / self.d2h_bytes_per_s

    def gpu_preprocess(self, elements: np.ndarray | float, calls: np.ndarray | float) -> np.ndarray | float:
        """Resize / composite / normalize / patchify: HBM traffic per element plus launches per call."""
        return elements * self.preprocess_bytes_per_element / self.hbm_bytes_per_s + calls * self.preprocess_fixed_s

    def cpu_preprocess(self, pixels: np.ndarray | float) -> np.ndarray | float:
        return pixels * self.cpu_preprocess_s_per_pixel

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


_SECTIONS = ("meta", "host", "link", "gpu", "producer")


def load_cost_model(name_or_path: str | Path = DEFAULT_COST_PROFILE) -> CostModel:
    """Read a cost profile by name (``sim/profiles/<name>.toml``) or path; errors name the file and key."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = PROFILES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))
        raise FileNotFoundError(f"cost profile {str(path)!r} does not exist; shipped profiles: {known}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"cost profile {str(path)!r} is not valid TOML: {e}") from None
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise ValueError(f"cost profile {str(path)!r}: unknown section(s) {unknown}; accepted: {list(_SECTIONS)}")
    flat: dict[str, Any] = {}
    for section in _SECTIONS[1:]:
        flat.update(data.get(section, {}))
    wanted = {f.name for f in fields(CostModel)} - {"name"}
    extra = sorted(set(flat) - wanted)
    missing = sorted(wanted - set(flat))
    if extra:
        raise ValueError(f"cost profile {str(path)!r}: unknown key(s) {extra}; accepted: {sorted(wanted)}")
    if missing:
        raise ValueError(f"cost profile {str(path)!r}: missing key(s) {missing}")
    return CostModel(name=data.get("meta", {}).get("name", path.stem), **flat)
