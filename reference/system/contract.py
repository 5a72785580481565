"""The deferred-item data contract's names (semantics §5) and the accepted input modes: shared, not behaviour.

Producers write and consumers read these keys; ``impl`` keeps the producer and
consumer code apart so a property can catch a key one side reads and the other
never wrote. What each contract version carries is data here, so the oracle
and the implementation agree on names without sharing algorithms. The PIL
modes the HARDENED front door accepts (`ACCEPTED_MODES`, enforced by
``impl.validation``) are here too, so a claim test can draw from them without
importing the implementation it judges.
"""

from __future__ import annotations

DEFERRED_PREPROCESSING_KEY = "kimi_k3_deferred_preprocessing"
IMAGE_GRID_THW_KEY = "image_grid_thw"
GRID_THWS_KEY = "grid_thws"  # the consumer's fallback key for the grid
RESIZE_CONFIG_KEYS = ("num_tokens", "new_width", "new_height", "pad_width", "pad_height")

# Fields of the deferred config per contract version.
CONTRACT_FIELDS: dict[str, frozenset[str]] = {
    # PR #33921: a plain dict, no backend.
    "pr-dict": frozenset({"image_mean", "image_std", "transparent_bg_config", "resize_config"}),
    # 418975ba6 (EPD): the EPD producer adds backend + feature_layout; the non-EPD one does not.
    "epd-dict": frozenset(
        {"image_mean", "image_std", "transparent_bg_config", "resize_config", "backend", "feature_layout"}
    ),
    # 8554d9a5b and later: a frozen dataclass with backend.
    "dataclass": frozenset({"backend", "image_mean", "image_std", "transparent_bg_config", "resize_config"}),
}

BACKENDS = ("gpu", "cpu")
TRANSPORTS = ("cpu", "cuda_ipc", "fabric")
# PIL modes PIL converts to RGB/RGBA losslessly for 8-bit content (semantics §3.1); HARDENED rejects the others.
ACCEPTED_MODES = ("1", "L", "P", "LA", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr")
