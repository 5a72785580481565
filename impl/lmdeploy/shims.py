"""Functional stand-ins for what LMDeploy's InternVL preprocessing imports from transformers.

Why: ``lmdeploy/vl/model/internvl.py`` imports ``AutoConfig, AutoModel, AutoTokenizer, CLIPImageProcessor`` from
transformers at module level, and ``InternVLVisionModel.build_preprocessor`` calls
``CLIPImageProcessor.from_pretrained(model_path)`` inside ``try ... except OSError`` before it decides between
its tiling path and the CLIP processor (semantics §19.2 step 2). transformers is not a deferlab dependency, and
a permissive stand-in would raise `StandInUsedError` there instead of ``OSError``. The stand-in answers as
transformers answers for a snapshot without ``preprocessor_config.json``: ``OSError``. On the InternVL 2.5/3
checkpoints (``dynamic_image_size: true``) the tiling path is taken whatever it answers. Everything else of
transformers stays permissive and raises if run.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from deferlab.impl.loader.standins import StandInModule


class CLIPImageProcessor:
    """``from_pretrained`` raises ``OSError``, as transformers does for a folder without an image processor."""

    @classmethod
    def from_pretrained(cls, path: Any, *args: Any, **kwargs: Any) -> CLIPImageProcessor:
        raise OSError(
            f"deferlab stand-in: {path!r} has no preprocessor_config.json (transformers' answer for such a snapshot)"
        )


def _transformers(name: str) -> types.ModuleType:
    module = StandInModule(name)
    module.CLIPImageProcessor = CLIPImageProcessor  # type: ignore[attr-defined]
    return module


NOTE = (
    "functional stand-in (deferlab): CLIPImageProcessor.from_pretrained raises OSError as for a snapshot without "
    "preprocessor_config.json; the rest of transformers is permissive and raises if run"
)
FUNCTIONAL: dict[str, tuple[Callable[[str], types.ModuleType], str]] = {
    "transformers": (_transformers, NOTE),
}
