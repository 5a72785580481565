"""What an engine path serves the model, and the image classes served-vs-trained is read per (semantics §16).

Why in the description room: the checkpoint oracle (``reference.oracle.checkpoint``)
says what the model was trained on; each engine path (SGLang's eager producer
and deferred owner paths, vLLM's image path, deferlab's model under a policy)
says what it serves. The claims C13-C15, the skew table and the figures compare
the two through this one protocol, so none of them knows an engine.
"""

from __future__ import annotations

from collections.abc import Sequence
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
