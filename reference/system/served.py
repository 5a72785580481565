"""What an engine path serves the model, and the image classes served-vs-trained is read per (semantics §16).

Why in the description room: the checkpoint oracle (``reference.oracle.checkpoint``)
says what the model was trained on; each engine path (SGLang's eager producer
and deferred owner paths, vLLM's image path, deferlab's model under a policy)
says what it serves. The claims C13-C15, the skew table and the figures compare
the two through this one protocol, so none of them knows an engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deferlab.reference.system.config import PreprocessConfig

# The variable naming a model snapshot folder whose preprocessor_config.json the served claims run under (the
# report's --checkpoint sets it for its child pytest runs; pytest's --checkpoint sets it in the session).
CHECKPOINT_ENV = "DEFERLAB_CHECKPOINT"

# The image classes of the skew table, in its row order (semantics §16.3): each is one way a PIL image can
# carry (or not carry) colour and transparency that an engine may treat differently from the checkpoint.
IMAGE_CLASSES = (
    "RGB",
    "L",
    "RGBA opaque",
    "RGBA partly transparent",
    "LA",
    "P",
    "P with tRNS",
    "1",
    "RGB with a stray key",
    "L with a key",
    "I;16",
    "I",
    "F",
    "PA",
    "RGBX",
    "CMYK",
    "YCbCr",
)


@runtime_checkable
class ServedPath(Protocol):
    """One way an engine turns a request's images into what the vision tower reads.

    ``label``: the verdict column (e.g. ``"VLLM"``, ``"SGLANG"``, a model policy); ``path``: which of the
    system's paths (``"served"``, ``"eager"``, ``"deferred"``); ``system``: what ran (``"vllm-0.33.0"``);
    ``dtype``: what the tower reads (``"float32"`` or ``"bfloat16"``: values are returned as float32 either
    way, a BF16 path's exactly widened).
    """

    label: str
    path: str
    system: str
    dtype: str
    real_code: bool

    def serve(self, images: Sequence[Any], cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
        """(pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3)) for ``images`` in order."""

    def num_tokens(self, width: int, height: int, cfg: PreprocessConfig) -> int:
        """The image tokens the prompt gets for an image of that size (pixel-free)."""

    def geometry(self, width: int, height: int, cfg: PreprocessConfig) -> tuple[int, int, int, int]:
        """(new_width, new_height, pad_width, pad_height) for an image of that size (pixel-free)."""

    def provenance(self) -> dict[str, str]:
        """Per step: the function that ran (``module.qualname``) or ``"model"`` / ``"modelled: why"``."""


# --- The model families beyond Kimi-K3 (semantics §18) -------------------------------------------------------------
@dataclass(frozen=True)
class Geometry:
    """What a processor makes of an image's size, pixel-free (claim C13 for every family).

    ``width`` x ``height``: the resize target of the whole image (InternVL: the tiled canvas); ``grid``: the
    patch grid the prompt is built from (Qwen: (t, h, w) patches; Kimi: (1, h, w); InternVL: (rows, cols,
    tiles with the thumbnail)); ``tokens``: the image tokens the prompt gets; ``pad``: (pad_width, pad_height)
    where the processor pads (Kimi), else (0, 0)."""

    width: int
    height: int
    grid: tuple[int, ...]
    tokens: int
    pad: tuple[int, int] = (0, 0)


@runtime_checkable
class FamilyPath(Protocol):
    """One processor of a model family: the trained side (the checkpoint's) or an engine's served path.

    ``family``: its family (`reference.system.families`); ``label``: the verdict column (``VLLM``,
    ``VLLM host-normalized``, ``SGLANG``, ``TRAINED``); ``path``: which of the system's paths
    (``device-normalized``, ``host-normalized``, ``served``, ``trained``); ``system``: what ran
    (``vllm-0.34.0``, ``transformers-5.24.0``); ``dtype``: what the vision tower reads (``float32`` or
    ``bfloat16``; values are returned as float32 either way, a BF16 path's exactly widened).
    """

    family: str
    label: str
    path: str
    system: str
    dtype: str
    real_code: bool

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """What the processor makes of an image of that size (pixel-free)."""

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        """(values float32 (N, C, L): what the tower reads, channel-major within each patch or tile;
        grid int64 (n_images, 3)) for ``images`` in order: ``L`` is T*p*p (Qwen), p*p (Kimi), 448*448 (InternVL)."""

    def levels(self, cfg: Any) -> np.ndarray:
        """(C, 256) float32: what the path finally gives each uint8 level of each channel (claim C15)."""

    def provenance(self) -> dict[str, str]:
        """Per step: the function that ran (``module.qualname``) or ``"modelled: why"``."""
