"""The seam protocol: what an implementation under test provides, and the one label per real system.

Why in the description room: the property harness (``properties.seam``), deferlab's
model behind the seam (``impl.seam``) and the adapters over real engines all
speak this protocol, and none of them may import another's room to learn it.
So the method and fact names, the array conversion every property applies to
an answer (`to_numpy`, NumPy only: a torch tensor is converted through its own
methods, torch is never imported here) and the label a real system's verdicts
are recorded under live here. ``properties/SEAM.md`` says what each method
must accept and return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.systems import LABELS

# The one label per real system (`reference.system.systems`): its claim verdicts are recorded under it (there is
# no policy to choose; the version is what it is).
SGLANG_LABEL = LABELS["sglang"]

# Short names for the parameter types the protocol's methods share (the implementations import them, so a
# signature is written as briefly in each): the images of a request, the items a producer made, the checkpoint's
# preprocessing config, a float32 (C, H, W) array, the per-channel mean or std.
Images = Sequence[Any]
Items = Sequence[Any]
Config = PreprocessConfig
Array = np.ndarray
Floats = Sequence[float]
Background = BackgroundConfig | Mapping[str, Any] | None  # a checkpoint's dict may leave keys to their defaults

# The pipeline steps and system roles a test calls, and the facts about a version a claim asks.
METHODS = (
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
FACTS = ("gate_paths", "defers", "has_epd", "skip_pre_embed", "ack_counts", "provenance")


def label_for(engine: str) -> str:
    """The verdict label of real ``engine`` (e.g. ``"sglang"`` -> ``"SGLANG"``); KeyError names the known ones."""
    try:
        return LABELS[engine.lower()]
    except KeyError:
        raise KeyError(f"no label for engine {engine!r}; known: {', '.join(LABELS)}") from None


@runtime_checkable
class Impl(Protocol):
    """What an implementation under test provides (one method per pipeline step, plus the system roles)."""

    name: str

    def to_chw_uint8(self, image: Any, *, promote_rgb_transparency: bool = False) -> Any:
        """Stage a PIL image or uint8 tensor to uint8 (C, H, W); ValueError/TypeError on bad input."""

    def resize(self, x: Array, out_h: int, out_w: int, device: str = "cpu") -> Any:
        """Float32 (C, H, W) integer levels to (C, out_h, out_w): aa bicubic, round half even, clamp."""

    def fill_transparent_bg(self, x: Array, background: Background, device: str = "cpu") -> Any:
        """Float32 (C, H, W) after resize to (3, H, W): composite 4 channels, pass 3 through."""

    def normalize_and_patchify(
        self, x: Array, mean: Floats, std: Floats, patch_size: int, padded_h: int, padded_w: int, device: str = "cpu"
    ) -> Any:
        """Float32 (3, H, W) to (gh*gw, 3, p, p): zero pad bottom/right, x*scale+bias, patchify."""

    def preprocess(self, images: Images, config: Config, device: str = "cpu") -> tuple[Any, Any]:
        """The eager pipeline: (pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3))."""

    def gate_bytes(self, images: Images, config: Config) -> tuple[int, int]:
        """(raw bytes, processed bytes) the gate counts for ``images``, summed."""

    def defer_decisions(
        self,
        images: Images,
        config: Config,
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
        images: Images,
        config: Config,
        *,
        policy: Any,
        transport: str = "cpu",
        epd: bool = False,
        device: str = "cpu",
        gate_path: str | None = None,
    ) -> Any:
        """The producer, preprocessing eager items on ``device`` (non-EPD, or the EPD start path with ``epd=True``): an object with ``.items`` (feature, model_specific_data) and ``.deferred``."""

    def epd_items(self, images: Images, config: Config, *, policy: Any, backend: str = "gpu") -> list[Any]:
        """The EPD producer's deferred items (backend "gpu": staged uint8; "cpu": the raw input); an image may come
        as the encoder's dict media item ``{"type": "image", "image": ...}``, any other dict is a ValueError."""

    def deliver(self, items: Items, num_ranks: int, *, policy: Any) -> list[list[Any]]:
        """CPU transport: one deserialized copy of the items per rank."""

    def materialize(
        self, items: Items, owner_indices: Sequence[int], config: Config, *, policy: Any, device: str = "cpu"
    ) -> Any:
        """The owner's loader: BF16 features of ``items[owner_indices]`` in that order.

        ``config`` is the checkpoint's (the model's vision tower takes its patch size from it).
        """

    def vision_dp(self, items: Items, num_ranks: int, config: Config, *, policy: Any, device: str = "cpu") -> Any:
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
        """IPC acknowledgement count sources for the simulator's state machine (`reference.system.ipc.AckCounts`)."""

    def provenance(self) -> dict[str, str]:
        """Per method: ``"model"`` (deferlab's model), ``"real"`` (the system's own code) or ``"modelled: why"``."""


def call_methods() -> list[str]:
    """The protocol's method names (what provenance is reported for)."""
    return list(METHODS) + list(FACTS)


def is_real_code(impl: Any) -> bool:
    """True for implementations that run the system's own code (their claim verdicts are findings, not checks)."""
    return bool(getattr(impl, "real_code", False))


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
