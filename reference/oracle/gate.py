"""The deferral gate (semantics §4): ship raw uint8 pixels iff they are not larger than the FP32 patches.

This is the semantics's *stated* rule, the oracle for ``impl``'s version of
``_should_defer_gpu_preprocessing``: for instance a 2-D uint8 array counts 3
channels here, while upstream reads ``shape[2]`` first and raises IndexError
(semantics §4.1), a difference a property can then show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from PIL import Image

from deferlab.reference.oracle.navit import resize_config, resize_config_arrays
from deferlab.reference.oracle.stage import image_size, raw_channels
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.validate import as_array, is_tensor_like, type_name

FLOAT32_BYTES = 4


def defers(raw: Any, processed: Any) -> Any:
    """The byte rule itself (semantics §4): defer iff the raw bytes are not larger than the processed ones (ties defer).

    Scalars or arrays (elementwise); every form of the gate here, and the
    simulator's and the sweeps' request sums, compare through this one rule.
    """
    return raw <= processed


class ImagePayload(NamedTuple):
    """One image's transport size both ways: raw uint8 at the source size vs FP32 padded patches."""

    width: int
    height: int
    channels: int
    raw_bytes: int
    processed_bytes: int


def _is_gate_image(image: Any) -> bool:
    """A PIL image or a uint8 array/tensor: the only inputs the gate lets through."""
    if isinstance(image, Image.Image):
        return True
    if isinstance(image, np.ndarray) or is_tensor_like(image):
        return as_array("image", image).dtype == np.uint8
    return False


def _check_config(config: Any) -> PreprocessConfig:
    if not isinstance(config, PreprocessConfig):
        raise InputTypeError(f"config must be a PreprocessConfig, got {type_name(config)}")
    return config


def payload(images: Sequence[Any], config: PreprocessConfig) -> list[ImagePayload]:
    """Per image: raw = channels * w * h (the gate's channel rule), processed = 3 * padded_w * padded_h * 4."""
    config = _check_config(config)
    out = []
    for image in images:
        width, height = image_size(image)
        channels = raw_channels(image)
        rc = resize_config(width, height, config)
        processed = 3 * rc.padded_width * rc.padded_height * FLOAT32_BYTES
        out.append(ImagePayload(width, height, channels, channels * width * height, processed))
    return out


def _gate_open(images: Sequence[Any], transport: str, cuda_available: bool) -> bool:
    if not isinstance(transport, str):
        raise InputTypeError(f"transport must be a str such as 'cpu', 'cuda_ipc' or 'fabric', got {transport!r}")
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise InputTypeError(f"images must be a sequence (list/tuple) of images, got {type_name(images)}")
    return bool(images) and transport == "cpu" and bool(cuda_available) and all(map(_is_gate_image, images))


def should_defer(
    images: Sequence[Any], config: PreprocessConfig, transport: str = "cpu", cuda_available: bool = True
) -> bool:
    """One decision per request: defer iff sum(raw) <= sum(processed) (ties defer), when the gate is open.

    Closed (False) when there are no images, the transport is not ``"cpu"``,
    CUDA is absent, or any input is neither a PIL image nor a uint8 array.
    """
    config = _check_config(config)
    if not _gate_open(images, transport, cuda_available):
        return False
    sizes = payload(images, config)
    return defers(sum(s.raw_bytes for s in sizes), sum(s.processed_bytes for s in sizes))


def should_defer_per_image(
    images: Sequence[Any], config: PreprocessConfig, transport: str = "cpu", cuda_available: bool = True
) -> list[bool]:
    """The later upstream form (3d3194f6c): the same gate, applied to each image alone."""
    config = _check_config(config)
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise InputTypeError(f"images must be a sequence (list/tuple) of images, got {type_name(images)}")
    return [should_defer([image], config, transport, cuda_available) for image in images]


def decide_arrays(
    widths: np.ndarray, heights: np.ndarray, channels: np.ndarray | int, config: PreprocessConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized single-image gate over broadcastable sizes: (raw int64, processed int64, defer bool)."""
    config = _check_config(config)
    w = np.asarray(widths, dtype=np.int64)
    h = np.asarray(heights, dtype=np.int64)
    c = np.asarray(channels, dtype=np.int64)
    if c.size and (int(c.min()) < 1):
        raise InputValueError("channels must all be >= 1 (3 for RGB-like, 4 with alpha)")
    rc = resize_config_arrays(w, h, config)
    raw = c * w * h
    processed = 3 * rc.padded_width * rc.padded_height * FLOAT32_BYTES
    raw, processed = np.broadcast_arrays(raw, processed)
    return raw.copy(), processed.copy(), defers(raw, processed)
