"""The implementation seam: what the properties call, and how ``--impl`` picks who answers.

Why a seam: the properties are the product, the implementation is a
parameter. The same suite checks deferlab's torch ``impl/``, a deliberately
broken copy of it (the proof that each property can fail), or another
system with the same functions (e.g. SGLang's on a GPU box), without editing
a test. The protocol is `Impl` below; ``properties/SEAM.md`` says what each
function must accept and return. Arrays may be NumPy arrays or torch tensors:
the properties convert with `to_numpy`.

``--impl NAME`` looks ``NAME`` up in `REGISTRY`; ``--impl module:object``
imports ``module`` and takes ``object`` (an instance, or a class / factory
called with no arguments).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deferlab.impl.seam import DeferlabImpl
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig

DEFAULT_IMPL = "deferlab"


@runtime_checkable
class Impl(Protocol):
    """What an implementation under test provides (one method per pipeline step, plus the system roles)."""

    name: str

    def to_chw_uint8(self, image: Any, *, promote_rgb_transparency: bool = False) -> Any:
        """Stage a PIL image or uint8 tensor to uint8 (C, H, W); ValueError/TypeError on bad input."""

    def resize(self, x: np.ndarray, out_h: int, out_w: int, device: str = "cpu") -> Any:
        """Float32 (C, H, W) integer levels to (C, out_h, out_w): aa bicubic, round half even, clamp."""

    def fill_transparent_bg(self, x: np.ndarray, background: BackgroundConfig | None, device: str = "cpu") -> Any:
        """Float32 (C, H, W) after resize to (3, H, W): composite 4 channels, pass 3 through."""

    def normalize_and_patchify(
        self,
        x: np.ndarray,
        mean: Sequence[float],
        std: Sequence[float],
        patch_size: int,
        padded_h: int,
        padded_w: int,
        device: str = "cpu",
    ) -> Any:
        """Float32 (3, H, W) to (gh*gw, 3, p, p): zero pad bottom/right, x*scale+bias, patchify."""

    def preprocess(self, images: Sequence[Any], config: PreprocessConfig, device: str = "cpu") -> tuple[Any, Any]:
        """The eager pipeline: (pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3))."""

    def gate_bytes(self, images: Sequence[Any], config: PreprocessConfig) -> tuple[int, int]:
        """(raw bytes, processed bytes) the gate counts for ``images``, summed."""

    def defer_decisions(
        self,
        images: Sequence[Any],
        config: PreprocessConfig,
        *,
        policy: Any,
        transport: str = "cpu",
        cuda_available: bool = True,
        gate_path: str | None = None,
    ) -> list[bool]:
        """The gate at call site ``gate_path`` (None: the default one), one decision per image (a per-request
        call site repeats its one decision)."""

    def process(
        self,
        images: Sequence[Any],
        config: PreprocessConfig,
        *,
        policy: Any,
        transport: str = "cpu",
        epd: bool = False,
        device: str = "cpu",
        gate_path: str | None = None,
    ) -> Any:
        """The producer, preprocessing eager items on ``device`` (non-EPD, or the EPD start path with ``epd=True``): an object with ``.items`` (feature, model_specific_data) and ``.deferred``."""

    def epd_items(
        self, images: Sequence[Any], config: PreprocessConfig, *, policy: Any, backend: str = "gpu"
    ) -> list[Any]:
        """The EPD producer's deferred items (backend "gpu": staged uint8; "cpu": the raw input)."""

    def deliver(self, items: Sequence[Any], num_ranks: int, *, policy: Any) -> list[list[Any]]:
        """CPU transport: one deserialized copy of the items per rank."""

    def materialize(
        self,
        items: Sequence[Any],
        owner_indices: Sequence[int],
        config: PreprocessConfig,
        *,
        policy: Any,
        device: str = "cpu",
    ) -> Any:
        """The owner's loader: BF16 features of ``items[owner_indices]`` in that order.

        ``config`` is the checkpoint's (the model's vision tower takes its patch size from it).
        """

    def vision_dp(
        self, items: Sequence[Any], num_ranks: int, config: PreprocessConfig, *, policy: Any, device: str = "cpu"
    ) -> Any:
        """Every rank of the group: ``.per_image`` (request order), ``.owners``, ``.ranks[r].log`` counters."""

    # -- facts about the system under test (what a claim needs beyond calling it) ------------------------------
    def gate_paths(self, policy: Any) -> list[tuple[str, bool]]:
        """Every call site of the gate as (name, decides per image), the default first."""

    def defers(self, policy: Any) -> bool:
        """Whether this version has a deferred path at all (False: claims about deferral are ``n/a``)."""

    def has_epd(self, policy: Any) -> bool:
        """Whether the EPD encoder has a deferred producer (False: the EPD start paths do not exist)."""

    def skip_pre_embed(self, policy: Any) -> bool:
        """Whether the scheduler skips its pre-embed feature move for the Kimi-K3 model (the whitelist)."""

    def ack_counts(self, policy: Any) -> list[Any]:
        """IPC acknowledgement count sources for the simulator's state machine (`sim.ipc.machine.AckCounts`)."""

    def provenance(self) -> dict[str, str]:
        """Per method: ``"model"`` (deferlab's model), ``"real"`` (the system's own code) or ``"modelled: why"``."""


class Recording:
    """The implementation under test, noting which of its methods a test called.

    Why: a claim's verdict is only as real as the code behind the methods
    its test called. The recorder reads `called` when it records a verdict
    and writes each method's provenance beside it (real code, patched, or
    modelled and why), so the report can say, per claim, what ran.
    """

    def __init__(self, impl: Any) -> None:
        object.__setattr__(self, "_impl", impl)
        object.__setattr__(self, "called", set())

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._impl, name)
        if name in _METHODS or name in _FACTS[:-1]:

            def traced(*args: Any, **kwargs: Any) -> Any:
                self.called.add(name)
                return value(*args, **kwargs)

            return traced
        return value

    def evidence(self) -> dict[str, str]:
        """Provenance of every method called since the last `reset`."""
        table = self._impl.provenance() if hasattr(self._impl, "provenance") else {}
        return {m: table.get(m, "unknown") for m in sorted(self.called)}

    def reset(self) -> None:
        self.called.clear()


ACTIVE: Recording | None = None  # the session's implementation, set by conftest's ``impl`` fixture


def evidence() -> dict[str, str]:
    """What the current test's claim ran on (empty outside a session)."""
    return ACTIVE.evidence() if ACTIVE is not None else {}


def is_real_code(impl: Any) -> bool:
    """True for implementations that run the system's own code (their claim verdicts are findings, not checks)."""
    return bool(getattr(impl, "real_code", False))


def call_methods() -> list[str]:
    """The protocol's method names (what provenance is reported for)."""
    return list(_METHODS) + list(_FACTS)


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy copy of an array or tensor (BF16 tensors become float32, exactly: BF16 widens losslessly)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    return np.asarray(x)


REGISTRY: dict[str, Callable[[], Impl]] = {"deferlab": DeferlabImpl}


def register(name: str, factory: Callable[[], Impl]) -> None:
    """Add an implementation under a short name (for ``--impl NAME``)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"implementation name must be a non-empty str without ':', got {name!r}")
    REGISTRY[name] = factory


def resolve_impl(spec: str | Impl, registry: Mapping[str, Callable[[], Impl]] | None = None) -> Impl:
    """The implementation named by ``spec``: a registered name, ``module:object``, or an `Impl` itself."""
    registry = REGISTRY if registry is None else registry
    if not isinstance(spec, str):
        obj = spec
    elif spec in registry:
        obj = registry[spec]()
    elif ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(f"--impl {spec!r}: cannot import module {module_name!r}: {e}") from None
        try:
            obj = getattr(module, attr)
        except AttributeError:
            raise ValueError(f"--impl {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
        if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Impl)):
            obj = obj()
    else:
        raise ValueError(f"--impl {spec!r}: not a registered name ({', '.join(registry)}) nor module:object")
    missing = [m for m in ("name", *_METHODS, *_FACTS) if not hasattr(obj, m)]
    if missing:
        raise TypeError(f"--impl {spec!r}: {type(obj).__name__} lacks {missing}; see properties/SEAM.md")
    return obj


_FACTS = ("gate_paths", "defers", "has_epd", "skip_pre_embed", "ack_counts", "provenance")
_METHODS = (
    "to_chw_uint8",
    "resize",
    "fill_transparent_bg",
    "normalize_and_patchify",
    "preprocess",
    "gate_bytes",
    "defer_decisions",
    "process",
    "epd_items",
    "deliver",
    "materialize",
    "vision_dp",
)
