"""SGLang's own processors of the model families beyond Kimi-K3 (semantics §18) as `FamilyPath`s.

Why a package apart from the Kimi-K3 driver: the Kimi-K3 load (`impl.sglang.sources.load`) imports only
Kimi-K3's modules; a family's SGLang module is imported from the same loaded tree only when its path is
asked for (`family_path`), so that load is unchanged, and a release that lacks the module is refused in
one line (`sources.SGLangSourceError`) before anything runs.

==========  ==============================  ==================================================================
family      SGLang module (processors/)     what runs here
==========  ==============================  ==================================================================
ernie-4.5-  ernie45_vl.py                   ``Ernie4_5_VLImageProcessor._pixel_values_norm`` (its own
vl                                          normalization of the checkpoint processor's levels): normalization only
gemma4      gemma4.py                       the base loader, then transformers' ``Gemma4ImageProcessor`` (its
                                            torchvision backend's rescale): normalization only
glm-4.1v    glm4v.py                        ``Glm4vImageProcessor._load_single_item`` (its own loader), then
                                            transformers' image processor: geometry and normalization
internvl    internvl.py                     ``InternVLProcessor``'s request entry, all of it on the CPU
kimi-k3     kimi_k25.py                     ``KimiGPUProcessorWrapper``'s GPU branch (Kimi-K2.5): its own torch
                                            on the CPU; only the CUDA dispatch is modelled
mimo-v2.5   mimo_v2.py                      ``MiMoProcessor.get_visual_transform`` (its own resize and
                                            standardize, module constants): normalization only
minicpm-    minicpmv4_6.py                  ``MiniCPMV4_6MultimodalProcessor``'s own image processor (its own
v-4.6                                       statistics): normalization only, read off a level image it keeps
paddleocr-  paddleocr_vlm.py                ``PaddleOCRVLImageProcessor`` (a ``QwenVLImageProcessor``): the Qwen
vl                                          path below with transformers' PaddleOCR-VL image processor
qwen2.5-vl  qwen_vl.py                      ``QwenVLImageProcessor.prepare_artifact_batch`` with the release's
qwen3-vl                                    transformers and torchvision (the loader's companions; the source
                                            must be loaded with them: ``sources.load(spec, companions=...)``)
step3-vl    step3_vl.py                     ``Step3VLProcessor`` (its own windowing, ToTensor, Normalize with
                                            its CLIP constants): normalization only
==========  ==============================  ==================================================================
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from deferlab.impl.sglang.families.common import FamilyPathBase, require, source_of
from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.reference.system.errors import InputValueError


@dataclass(frozen=True)
class Spec:
    """One family's SGLang path: the SGLang module it runs, its display name, deferlab's module and class for
    it, and the companions the source must have been loaded with (checked before anything is imported)."""

    module: str
    display: str
    mine: str
    cls: str
    companions: tuple[str, ...] = ()


_QWEN = Spec(
    "sglang.srt.multimodal.processors.qwen_vl", "Qwen-VL", "qwen_vl", "QwenVLPath", ("transformers", "torchvision")
)
PATHS: dict[str, Spec] = {
    "ernie-4.5-vl": Spec(
        "sglang.srt.multimodal.processors.ernie45_vl",
        "ERNIE-4.5-VL",
        "ernie45_vl",
        "Ernie45VLPath",
        ("transformers", "torchvision"),  # the module imports both
    ),
    "gemma4": Spec(
        "sglang.srt.multimodal.processors.gemma4",
        "Gemma 4",
        "gemma4",
        "Gemma4Path",
        ("transformers", "torchvision"),  # transformers' image processor, its torchvision backend
    ),
    "glm-4.1v": Spec(
        "sglang.srt.multimodal.processors.glm4v", "GLM-4V", "glm4v", "Glm4vPath", ("transformers", "torchvision")
    ),
    "internvl": Spec("sglang.srt.multimodal.processors.internvl", "InternVL", "internvl", "InternVLPath"),
    "kimi-k3": Spec("sglang.srt.multimodal.processors.kimi_k25", "Kimi-K2.5", "kimi_k25", "KimiK25Path"),
    "mimo-v2.5": Spec(
        "sglang.srt.multimodal.processors.mimo_v2",
        "MiMo-V2",
        "mimo_v2",
        "MiMoV2Path",
        ("transformers", "torchvision"),  # the module imports both
    ),
    "minicpm-v-4.6": Spec(
        "sglang.srt.multimodal.processors.minicpmv4_6",
        "MiniCPM-V 4.6",
        "minicpm_v46",
        "MiniCPMV46Path",
        ("transformers", "torchvision"),  # the module imports both (its base processor, its resize)
    ),
    "paddleocr-vl": Spec(
        "sglang.srt.multimodal.processors.paddleocr_vlm",
        "PaddleOCR-VL",
        "paddleocr_vl",
        "PaddleOCRVLPath",
        ("transformers", "torchvision"),
    ),
    "qwen2.5-vl": _QWEN,
    "qwen3-vl": _QWEN,
    "step3-vl": Spec(
        "sglang.srt.multimodal.processors.step3_vl",
        "Step3-VL",
        "step3_vl",
        "Step3VLPath",
        ("transformers", "torchvision"),  # the module imports both (its base processor, its transforms)
    ),
}


def family_path(source: Any, family: str, **options: Any) -> FamilyPathBase:
    """The SGLang path of ``family`` on ``source`` (a loaded `Source` or `SGLangImpl`).

    `InputValueError` for a family SGLang has no path for here; `SGLangSourceError` (one line) for a tree
    without that family's processor module, a source loaded without the companions the path computes with,
    or a module whose import fails inside SGLang.
    """
    name = str(family).strip().lower()
    if name not in PATHS:
        raise InputValueError(f"no SGLang path for model family {family!r}; accepted: {', '.join(PATHS)}")
    spec, src = PATHS[name], source_of(source)
    missing = [c for c in spec.companions if c not in getattr(src, "companions", {})]
    if missing:
        raise SGLangSourceError(
            f"sglang source {src.spec!r} (version {src.version}) was loaded without the companions {missing} its "
            f"{spec.display} path computes with; accepted: a source loaded with sources.load(spec, "
            f"companions={spec.companions}) in a process that has not imported them"
        )
    engine_module = require(src, spec.module, spec.display)
    builder = getattr(importlib.import_module(f"{__name__}.{spec.mine}"), spec.cls)
    if spec is _QWEN:  # one SGLang processor serves both Qwen families; the family picks the model type
        options = {"family": name, **options}
    return builder(src, engine_module, **options)


def paths(source: Any, family: str, **options: Any) -> list[FamilyPathBase]:
    """Every SGLang path of ``family`` on ``source`` (one: SGLang serves a family one way); ``options`` go to the
    path (the Qwen path's ``dtype``: ``float32`` keeps the processor's own values, before the model's cast)."""
    return [family_path(source, family, **options)]
