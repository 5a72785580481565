"""SGLang's PaddleOCR-VL processor (``processors/paddleocr_vlm.py``) as a `FamilyPath` (semantics §18.9).

Why a subclass of the Qwen-VL path: SGLang's ``PaddleOCRVLImageProcessor`` is its ``QwenVLImageProcessor`` with
PaddleOCR-VL's image tokens and more workers; the image path is the parent's, run as `qwen_vl.QwenVLPath` runs
it (model type ``paddleocr_vl``: the default cache-off path, each image through ``_load_single_item`` first,
then ``prepare_artifact_batch`` calling transformers' ``PaddleOCRVLImageProcessor`` of the release's pin on the
fast-processor device, the CPU here). What differs here: the class and its construction (its ``__init__``
calls the parent's, which calls the serving stack's: both run as shipped, the stack's answered as
`common.construct` does), the config written back for a typed config, and the patch layout the levels are read
through (raster over patches, ``(C*T, p, p)`` each). The token ids are the parent path's stand-ins: the count
``build_input_ids`` gives depends on the grid alone.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from deferlab.impl.sglang.families import qwen_vl
from deferlab.impl.sglang.runtime import run_with_globals
from deferlab.reference.system.family_configs import PaddleOCRVLConfig

MODULE = "sglang.srt.multimodal.processors.paddleocr_vlm"


class PaddleOCRVLPath(qwen_vl.QwenVLPath):
    """SGLang's PaddleOCR-VL image path: the Qwen-VL processor's, with PaddleOCR-VL's class and image processor."""

    engine_class = "PaddleOCRVLImageProcessor"
    model_types = {"paddleocr-vl": "paddleocr_vl"}
    config_type = PaddleOCRVLConfig
    processor_type = "PaddleOCRVLImageProcessor"

    def __init__(self, source: Any, module: types.ModuleType, dtype: str = "bfloat16") -> None:
        super().__init__(source, module, family="paddleocr-vl", dtype=dtype)

    def construct(self, hf_config: Any, server_args: Any, hf: Any) -> Any:
        """``PaddleOCRVLImageProcessor.__init__`` as shipped; its ``super().__init__`` is ``QwenVLImageProcessor``'s,
        also as shipped, whose own ``super().__init__`` (the serving stack) sets only the three attributes."""
        proc = object.__new__(self.cls)

        def stack_init(hf_config: Any, server_args: Any, _processor: Any, *_: Any, **__: Any) -> None:
            proc.hf_config, proc.server_args, proc._processor = hf_config, server_args, _processor

        stack = types.SimpleNamespace(__init__=stack_init)
        parent = run_with_globals(self.module.QwenVLImageProcessor.__init__, super=lambda *_: stack)
        middle = types.SimpleNamespace(__init__=lambda *args, **kwargs: parent(proc, *args, **kwargs))
        run_with_globals(self.cls.__init__, super=lambda *_: middle)(proc, hf_config, server_args, hf)
        for cls in (self.cls, self.module.QwenVLImageProcessor):
            self.source.patch(
                f"{cls.__module__}.{cls.__qualname__}.__init__",
                "own __init__ run as shipped; the serving stack's __init__ under QwenVLImageProcessor's only sets "
                "hf_config, _processor and server_args here",
            )
        return proc

    @staticmethod
    def _canvas(values: np.ndarray, grid: np.ndarray, ip: Any) -> np.ndarray:
        """(C, H, W) of one image's patches: raster over the patch grid, (C, T, p, p) inside each, frame 0."""
        _, gh, gw = (int(g) for g in grid)
        p, t = ip.patch_size, ip.temporal_patch_size
        blocks = values.reshape(gh, gw, 3, t, p, p)[:, :, :, 0]
        return blocks.transpose(2, 0, 3, 1, 4).reshape(3, gh * p, gw * p)

    def provenance(self) -> dict[str, str]:
        found = super().provenance()
        cls = f"{MODULE}.PaddleOCRVLImageProcessor"
        ip_module = f"transformers.models.paddleocr_vl.image_processing_paddleocr_vl ({self.transformers.version})"
        found["processor"] = (
            f"{cls}.__init__ and its parent's sglang.srt.multimodal.processors.qwen_vl.QwenVLImageProcessor.__init__ "
            "(own; the base class's __init__ answered by deferlab, default server args)"
        )
        found["load"] = f"{cls}._load_single_item (own, inherited: the default cache-off path), then the artifacts"
        found["serve"] = f"{cls}.prepare_artifact_batch (own, inherited) -> {ip_module}.PaddleOCRVLImageProcessor"
        found["geometry"] = f"{ip_module}.PaddleOCRVLImageProcessor.get_number_of_image_patches (own; locals at return)"
        return found
