"""Seeded workloads: requests with k images drawn from a size/mode family, and their arrivals.

A workload is column arrays (one row per image, requests as offsets), so the
accounting can run on 100,000 requests in NumPy. Families:

* ``chat``: 1-2 small phone/screenshot images per request, 15 % RGBA PNGs;
* ``docs``: 4 x 1536 x 1024 RGB pages per request (the PR's microbenchmark shape, semantics §9);
* ``4k``: one 3840 x 2160 RGB frame;
* ``mixed``: per request 60 % chat, 30 % docs, 10 % 4k;
* ``fixed``: every image ``image_size`` = [width, height] RGB (one per request unless ``images_per_request``);
* ``corpus``: the real sizes / modes / file sizes of the corpus shipped in ``reference/data/corpus`` (sim.corpus).

Arrivals are Poisson at ``rate`` requests/s, or ``closed``: every request is
offered at t = 0 (a closed loop at unlimited concurrency, like a benchmark at
request rate inf). One ``numpy.random.Generator`` per concern is spawned from
``SeedSequence(seed)``, so a seed fixes a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.reference.system.errors import ScenarioError
from deferlab.sim.corpus import load_corpus
from deferlab.sim.tables import dataclass_from_table

FAMILIES = ("chat", "docs", "4k", "mixed", "corpus", "fixed")
ARRIVALS = ("poisson", "closed")
_DEFAULT_K = {"chat": (1, 2), "docs": (4, 4), "4k": (1, 1), "corpus": (1, 3), "fixed": (1, 1)}
_CHAT_ASPECTS = np.array([[4, 3], [3, 4], [1, 1], [16, 9], [9, 16]], dtype=np.int64)


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate; validated so a bad scenario fails before any work."""

    family: str = "chat"
    n_requests: int = 1000
    images_per_request: tuple[int, int] | None = None  # inclusive range; None: the family's default
    arrival: str = "poisson"
    rate: float = 2.0  # requests / s (poisson only)
    seed: int = 0
    text_tokens: int = 256
    corpus_path: str | None = None
    image_size: tuple[int, int] | None = None  # family "fixed" only: [width, height]

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ScenarioError(f"workload.family must be one of {FAMILIES}, got {self.family!r}")
        if self.arrival not in ARRIVALS:
            raise ScenarioError(f"workload.arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        for key in ("n_requests", "seed", "text_tokens"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "n_requests" else 0):
                raise ScenarioError(f"workload.{key} must be an int >= {1 if key == 'n_requests' else 0}, got {v!r}")
        if self.arrival == "poisson":
            r = self.rate
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not np.isfinite(r) or r <= 0:
                raise ScenarioError(f"workload.rate must be a number > 0 (requests/s), got {r!r}")
        size = self.image_size
        if (self.family == "fixed") != (size is not None):
            raise ScenarioError(f"workload.image_size = {size!r}: give [width, height] exactly when family = 'fixed'")
        if size is not None:
            if (
                not isinstance(size, (tuple, list))
                or len(size) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in size)
            ):
                raise ScenarioError(f"workload.image_size must be [width, height], ints >= 1, got {size!r}")
            object.__setattr__(self, "image_size", (int(size[0]), int(size[1])))
        k = self.images_per_request
        if k is not None:
            if isinstance(k, int) and not isinstance(k, bool):
                k = (k, k)
            if (
                not isinstance(k, (tuple, list))
                or len(k) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) for x in k)
                or not 0 <= k[0] <= k[1]
            ):
                raise ScenarioError(
                    f"workload.images_per_request must be an int >= 0 or [min, max] with 0 <= min <= max, got {k!r}"
                )
            object.__setattr__(self, "images_per_request", (int(k[0]), int(k[1])))

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "workload") -> WorkloadSpec:
        return dataclass_from_table(cls, d, where)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "image_size" or self.image_size}


@dataclass(frozen=True)
class Workload:
    """Requests as column arrays: image i belongs to request ``request_of[i]``."""

    arrival_s: np.ndarray  # float64 [n_requests]
    offsets: np.ndarray  # int64 [n_requests + 1]; images of request r are offsets[r]:offsets[r+1]
    width: np.ndarray  # int64 [n_images]
    height: np.ndarray
    channels: np.ndarray  # 3 or 4 (semantics §3.1 has_alpha rule)
    encoded_bytes: np.ndarray  # int64, -1 when the image did not come from a file
    text_tokens: np.ndarray  # int64 [n_requests]

    @property
    def n_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def n_images(self) -> int:
        return len(self.width)

    @property
    def images_per_request(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def request_of(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_requests, dtype=np.int64), self.images_per_request)

    @classmethod
    def from_requests(
        cls, requests: list[list[tuple[int, int, int]]], *, arrival_s: list[float] | None = None, text_tokens: int = 0
    ) -> Workload:
        """Hand-built workload: per request a list of (width, height, channels)."""
        flat = [img for req in requests for img in req]
        counts = [len(req) for req in requests]
        arr = np.array(flat, dtype=np.int64).reshape(-1, 3)
        n = len(requests)
        return cls(
            arrival_s=np.zeros(n) if arrival_s is None else np.asarray(arrival_s, dtype=np.float64),
            offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            width=arr[:, 0].copy(),
            height=arr[:, 1].copy(),
            channels=arr[:, 2].copy(),
            encoded_bytes=np.full(len(arr), -1, dtype=np.int64),
            text_tokens=np.full(n, text_tokens, dtype=np.int64),
        )


def _counts(rng: np.random.Generator, n: int, k: tuple[int, int]) -> np.ndarray:
    return rng.integers(k[0], k[1] + 1, size=n).astype(np.int64)


def _chat_images(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    aspect = _CHAT_ASPECTS[rng.integers(0, len(_CHAT_ASPECTS), size=n)]
    long_side = rng.integers(256, 1281, size=n)
    short_side = np.maximum(1, long_side * aspect.min(axis=1) // aspect.max(axis=1))
    landscape = aspect[:, 0] >= aspect[:, 1]
    w = np.where(landscape, long_side, short_side)
    h = np.where(landscape, short_side, long_side)
    c = np.where(rng.random(n) < 0.15, 4, 3)
    return w.astype(np.int64), h.astype(np.int64), c.astype(np.int64)


def _fixed_images(n: int, w: int, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.full(n, w, np.int64), np.full(n, h, np.int64), np.full(n, 3, np.int64)


def generate(spec: WorkloadSpec) -> Workload:
    """Draw a workload from ``spec``; the same spec always gives the same arrays."""
    size_rng, count_rng, arrival_rng, mix_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(4)
    )
    n = spec.n_requests
    family = np.full(n, spec.family, dtype=object)
    if spec.family == "mixed":
        family = mix_rng.choice(np.array(["chat", "docs", "4k"], dtype=object), size=n, p=[0.6, 0.3, 0.1])
    counts = np.empty(n, dtype=np.int64)
    for fam in ("chat", "docs", "4k", "corpus", "fixed"):
        sel = family == fam
        k = spec.images_per_request or _DEFAULT_K[fam]
        counts[sel] = _counts(count_rng, int(sel.sum()), k)
    img_family = np.repeat(family, counts)
    total = int(counts.sum())
    width = np.empty(total, np.int64)
    height = np.empty(total, np.int64)
    channels = np.empty(total, np.int64)
    encoded = np.full(total, -1, np.int64)
    for fam in ("chat", "docs", "4k", "corpus", "fixed"):
        sel = np.flatnonzero(img_family == fam)
        if not len(sel):
            continue
        if fam == "chat":
            w, h, c = _chat_images(size_rng, len(sel))
        elif fam == "docs":
            w, h, c = _fixed_images(len(sel), 1536, 1024)
        elif fam == "4k":
            w, h, c = _fixed_images(len(sel), 3840, 2160)
        elif fam == "fixed":
            w, h, c = _fixed_images(len(sel), *spec.image_size)
        else:
            corpus = load_corpus(spec.corpus_path)
            pick = size_rng.integers(0, len(corpus), size=len(sel))
            w, h, c = corpus.width[pick], corpus.height[pick], corpus.channels[pick]
            encoded[sel] = corpus.encoded_bytes[pick]
        width[sel], height[sel], channels[sel] = w, h, c
    if spec.arrival == "poisson":
        arrival = np.cumsum(arrival_rng.exponential(1.0 / spec.rate, size=n))
    else:
        arrival = np.zeros(n)
    return Workload(
        arrival_s=arrival,
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        width=width,
        height=height,
        channels=channels,
        encoded_bytes=encoded,
        text_tokens=np.full(n, spec.text_tokens, dtype=np.int64),
    )


def corpus_available(path: str | Path | None = None) -> bool:
    """Whether a corpus manifest is readable: the built-in one (``path`` None) always ships with the package."""
    from deferlab.reference.oracle.corpus import BUILTIN
    from deferlab.sim.corpus import resolve_corpus

    root = BUILTIN if path is None else resolve_corpus(path)
    return (root / "MANIFEST.tsv").is_file()
