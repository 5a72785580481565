"""The reproducers of SGLang's own-code family paths (semantics §18.9): which recorded row each fits, and the values
it states (its texts are `reports.repro.sglang_families_texts`; SGLang's `EngineRepro.family_fits` names the fits).

Why apart from `reports.repro.families`: these processors resize, load or normalize with SGLang's own code
(ERNIE-4.5-VL's pre-resize and loader, MiMo-V2.5's whole image path, MiniCPM-V 4.6's image processor) or hand the
image to a transformers processor other than Qwen's (PaddleOCR-VL), so each family's file calls its own module. The
trained side is stated from deferlab's published configs (`reference.system.family_configs`): the checkpoint's
factor and pixel bounds (C13), its ``preprocessor_config.json`` for transformers' PIL backend (C14; MiMo-V2.5's a
``Qwen2VLImageProcessor`` config, semantics §18.9), its mean, std and rescale factor (C15). A C14 counterexample is
drawn in the file as deferlab draws it (`reports.repro.qwen_pixels.image_code`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.family_configs import family_profile, published_config
from deferlab.reports.repro import family_texts, qwen_pixels
from deferlab.reports.repro import qwen_pixels_texts as pixels
from deferlab.reports.repro import sglang_families_texts as texts
from deferlab.reports.repro.families import _consts, _norm_consts, _size

# family -> (imports, served text) of its C13 file: the functions that decide the size it is served at
_C13 = {
    "ernie-4.5-vl": (texts.ERNIE_C13_IMPORTS, texts.ERNIE_C13_SERVED),
    "mimo-v2.5": (texts.MIMO_C13_IMPORTS, texts.MIMO_PROCESSOR + texts.MIMO_C13_SERVED),
}


def own_c13(c: Any, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(imports, constants, body) of the C13 file of a family whose SGLang path decides the size with its own
    ``smart_resize`` (ERNIE-4.5-VL's pre-resize, MiMo-V2.5's), or None: another family, no recorded size."""
    size = _size(ce, failure)
    if c.family not in _C13 or c.path is not None or size is None:
        return None
    cfg = family_profile(c.family)
    consts = f"# The checkpoint processor's factor, pixel bounds, patch and merge (deferlab's published {c.family!r} profile):\n"  # fmt: skip
    consts += _consts(FACTOR=cfg.factor, MIN_PIXELS=cfg.min_pixels, MAX_PIXELS=cfg.max_pixels)
    consts += _consts(PATCH=cfg.patch_size, MERGE=cfg.merge_size)
    consts += "# deferlab's minimal counterexample, (width, height):\n" + _consts(SIZE=size)
    imports, served = _C13[c.family]
    return imports, consts, served + texts.C13_TEST


def mimo_preprocessor_config(family: str) -> dict[str, Any]:
    """MiMo-V2.5's checkpoint ``preprocessor_config.json`` as semantics §18.9 states it: a ``Qwen2VLImageProcessor``
    config (SGLang 0.5.22's comment) with the published statistics, its bounds, patch and merge the class defaults
    deferlab's profile holds, temporal patch 2 (the class default)."""
    cfg = family_profile(family)
    return {
        "image_processor_type": "Qwen2VLImageProcessor",
        "size": {"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels},
        "patch_size": cfg.patch_size,
        "temporal_patch_size": 2,
        "merge_size": cfg.merge_size,
        "image_mean": list(cfg.image_mean),
        "image_std": list(cfg.image_std),
        "rescale_factor": cfg.rescale_factor,
        "do_rescale": cfg.do_rescale,
        "do_normalize": cfg.do_normalize,
    }


def _paddle(text: str) -> str:
    """The Qwen path's SGLang text for PaddleOCR-VL: its ``PaddleOCRVLImageProcessor`` is a ``QwenVLImageProcessor``
    with its own image tokens (semantics §18.9), so the same calls on its class, imported from its module."""
    module, qwen, paddle = texts.PADDLE_CLASS
    text = text.replace(f"from {module} import {qwen}", f"from sglang.srt.multimodal.processors.paddleocr_vlm import {paddle}")  # fmt: skip
    return text.replace(qwen, paddle)


def _c14_path(family: str, row: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """(imports, CFG, constants, served text and test) of a family's C14 file; None where its path is not one of
    these or the row does not say which load step ran."""
    if family == "ernie-4.5-vl":
        served = texts.BUILT + texts.ERNIE_C14_SERVED + pixels.C14_TEST
        return texts.ERNIE_C14_IMPORTS, repr(published_config(family)), "", served
    if family == "glm-4.1v":
        return texts.GLM_C14_IMPORTS, repr(published_config(family)), "", texts.GLM_C14_SERVED + pixels.C14_TEST
    if family == "mimo-v2.5":
        served = texts.MIMO_PROCESSOR + texts.MIMO_C14_SERVED + texts.MIMO_C14_TEST
        return texts.MIMO_C14_IMPORTS, repr(mimo_preprocessor_config(family)), "", served
    if family == "paddleocr-vl":
        found = qwen_pixels.sglang_served(row)  # LOAD_FIRST from the recorded load step, as the Qwen files read it
        if found is None:
            return None
        imports, consts, served = found
        return _paddle(imports), repr(published_config(family)), consts, _paddle(served) + pixels.C14_TEST
    return None


def own_c14(c: Any, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(imports, constants, body) of the C14 file of ERNIE-4.5-VL's, MiMo-V2.5's, PaddleOCR-VL's or GLM-4.1V's SGLang path, or
    None: another family, a counterexample that is not a drawn case, a row whose served path is unknown."""
    case = qwen_pixels._case(ce)
    found = _c14_path(c.family, row) if case is not None and c.path is None else None
    if found is None or case is None:
        return None
    imports, cfg, path, served = found
    consts = f"# The checkpoint's preprocessor_config.json (deferlab's published {c.family!r} profile):\nCFG = {cfg}\n"
    return pixels.COMMON_IMPORTS + imports, consts + path, qwen_pixels.image_code(*case) + pixels.COMMON + served


def minicpm_c15(c: Any, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(imports, constants, body) of MiniCPM-V 4.6's C15 file (SGLang's own image processor normalizes), or None:
    another family, a failure that is not the FP32 comparison."""
    if c.family != "minicpm-v-4.6" or c.path is not None or "differ from the checkpoint in FP32" not in failure:
        return None
    consts = f"# The checkpoint's normalization (deferlab's published {c.family!r} profile; semantics §18.1):\n"
    consts += _norm_consts(c.family)
    body = texts.BUILT + texts.MINICPM_C15_SERVED + family_texts.TRAINED_LEVELS
    return texts.MINICPM_C15_IMPORTS, consts, body
