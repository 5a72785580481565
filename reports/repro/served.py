"""The served-vs-trained reproducer templates (C13, C14; vLLM's C15): an engine's served image against the
checkpoint's processor, stated in the file: fitting a recorded counterexample to them (their texts are
`reports.repro.served_texts`).

Why the checkpoint's processor is written out: a reproducer imports nothing of
deferlab, and no engine ships the checkpoint's remote-code processor, so the
expected values are computed in the file from what semantics §3.2, §11.1 and
§11.3 state of it, in a few lines each: the resize decision, Pillow's bicubic
resize and conversions (Pillow's rules *are* the trained semantics), the
background fill, zero padding, the NumPy normalization and the patch layout.
The served side calls the engine's own functions: SGLang's owner pipeline
``_gpu_preprocess_images`` with the hooks its model passes (its eager producer
runs the same pipeline), vLLM's request parser and the image processor its
Kimi-K3 path serves with (read off the row's provenance: vLLM 0.27-0.31 serve
the checkpoint's remote code, so there only the parser is vLLM's).

The config is deferlab's default profile (the served claims' own unless
``--checkpoint`` is given) with the case's geometry, as a ``media_proc_cfg``.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.engines import engine as engine_facts
from deferlab.reference.system.profiles import DEFAULT_PROFILE, profile
from deferlab.reports.repro.engines import repro_of
from deferlab.reports.repro.fitting import GEOMETRY, PIL_IMAGE, stats_pair
from deferlab.reports.repro.served_texts import (
    _IMAGE_ARRAY,
    _IMAGE_PIL,
    C13,
    C14,
    SGLANG_GEOMETRY,
    SGLANG_GEOMETRY_IMPORTS,
    SGLANG_IMPORTS,
    SGLANG_SERVE,
    VLLM_C15,
    VLLM_GEOMETRY,
    VLLM_GEOMETRY_IMPORTS,
    VLLM_IMPORTS,
    VLLM_REMOTE_IMPORTS,
    VLLM_REMOTE_SERVE,
    VLLM_SERVE,
)

__all__ = ["C13", "C14", "VLLM_C15", "fit_c13", "fit_c14", "fit_vllm_c15", "media_proc_cfg", "vllm_processor"]


_PIL = re.compile(PIL_IMAGE + "$")
_ARRAY = re.compile(r"numpy\.ndarray\(dtype=uint8, shape=\((\d+), (\d+), (\d+)\), values=(\[.*\])\)$")
_C14_PREFIX = re.compile(
    r"AssertionError: \[([^\]]+)\] \d+x\d+(?:x\d+)?(?: geometry \((\d+), (\d+), (\d+), (\d+)\))?"
    r"(?P<exif> EXIF orientation \d+)?: "
)


def media_proc_cfg(cfg: PreprocessConfig, engine: str) -> dict[str, Any]:
    """The ``media_proc_cfg`` a reproducer states: the config's, plus the keys the engine's processor reads beside
    them (vLLM's: the video keys; `reports.repro.engines.EngineRepro.media_proc_defaults`)."""
    return {**repro_of(engine).media_proc_defaults(), **cfg.to_media_proc_cfg()}


def vllm_media_proc_defaults() -> dict[str, Any]:
    """The video keys vLLM's processor reads from a ``media_proc_cfg`` (its driver's defaults), asked through its
    plugin's hooks (`EngineFacts.hooks`): the CLI never imports an engine's package (issue 29, item 4)."""
    return dict(importlib.import_module(engine_facts("vllm").hooks).media_proc_defaults())


def _literal(value: Any, indent: str = "") -> str:
    """``value`` as Python source, a dict one key per line (a reproducer's constants are read, not parsed)."""
    if not isinstance(value, dict) or not value:
        return repr(value)
    inner = indent + "    "
    items = [f"{inner}{k!r}: {_literal(v, inner)}," for k, v in value.items()]
    return "{\n" + "\n".join(items) + f"\n{indent}}}"


def _session() -> PreprocessConfig:
    return profile(DEFAULT_PROFILE)


def vllm_processor(row: Mapping[str, Any] | None) -> tuple[str, str] | None | bool:
    """(module, class) of the image processor vLLM served with, from the row's provenance; False when vLLM served
    the checkpoint's remote code; None when the row does not say."""
    for key, what in ((row or {}).get("provenance") or {}).items():
        if not str(key).endswith(": serve"):
            continue
        m = re.search(r"-> ([\w.]+)\.(\w+)\.preprocess(?: with .*)?$", str(what))
        if m is not None:
            return m.group(1), m.group(2)
        if "remote-code processor" in str(what):
            return False
    return None


def _serving(engine: str, row: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The imports and ``_serve`` text for ``engine`` (None: its served side unknown from the row)."""
    return repro_of(engine).serving(row)


def sglang_serving(row: Mapping[str, Any] | None) -> dict[str, str]:
    """SGLang's served side: its owner pipeline, whatever the row."""
    return {"imports": SGLANG_IMPORTS, "serve": SGLANG_SERVE}


def vllm_serving(row: Mapping[str, Any] | None) -> dict[str, str] | None:
    """vLLM's served side: the processor its provenance names (None: the row does not say)."""
    found = vllm_processor(row)
    if found is None:
        return None
    if found is False:
        return {"imports": VLLM_REMOTE_IMPORTS, "serve": VLLM_REMOTE_SERVE}
    module, cls = found
    imports = VLLM_IMPORTS.replace("$processor_module", module).replace("$processor_class", cls)
    return {"imports": imports, "serve": VLLM_SERVE.replace("$processor_class", cls)}


def _image_code(text: str) -> str | None:
    """The constants and ``_image`` that rebuild a recorded image (None: not rebuildable from its description)."""
    m = _PIL.search(text)
    if m is not None:
        try:
            info = ast.literal_eval(m.group(4))
        except (ValueError, SyntaxError):
            return None
        palette = f"bytes.fromhex({m.group(6)!r})" if m.group(6) is not None else "None"
        size = (int(m.group(2)), int(m.group(3)))
        head = f"MODE, SIZE, INFO = {m.group(1)!r}, {size!r}, {info!r}\n"
        head += f"DATA = bytes.fromhex({m.group(5)!r})\nPALETTE = {palette}\n"
        return head + _IMAGE_PIL
    m = _ARRAY.search(text)
    if m is not None:
        return f"VALUES = {m.group(4)}  # shape ({m.group(1)}, {m.group(2)}, {m.group(3)})\n" + _IMAGE_ARRAY
    return None


def _geometry_values(cfg: PreprocessConfig, engine: str, note: str) -> str:
    consts = f"# The checkpoint's media_proc_cfg (its preprocessor_config.json): {note}\n"
    consts += f"CFG = {_literal(media_proc_cfg(cfg, engine))}\n"
    if repro_of(engine).geometry_args:
        consts += f"GEOMETRY = {GEOMETRY!r}  # navit_resize_config's arguments\n"
    return consts


def fit_c14(
    ce: Any, failure: str, row: Mapping[str, Any] | None = None, *, engine: str = "sglang"
) -> dict[str, Any] | None:
    """C14's counterexample (an image, its class and geometry, from the failure's prefix) as the template's
    imports, constants and ``_serve``; None when the image cannot be rebuilt from its description."""
    m = _C14_PREFIX.match(failure)
    if m is None or m.group("exif"):  # an EXIF orientation is not in the recorded description
        return None
    image = _image_code(str(ce))
    serving = _serving(engine, row)
    if image is None or serving is None:
        return None
    cfg = _session()
    if m.group(2) is not None:
        p, merge, limit, side = (int(m.group(i)) for i in range(2, 6))
        cfg = replace(
            cfg, patch_size=p, merge_kernel_size=merge, in_patch_limit=limit, patch_limit_on_one_side=side,
            fixed_output_tokens=None,
        )  # fmt: skip
    consts = _geometry_values(cfg, engine, f"deferlab's {cfg.name!r} profile, with the case's geometry")
    consts += f"# The image (class {m.group(1)!r} of semantics §16.3):\n" + image
    return {**serving, "consts": consts}


def _geometry_config(name: str) -> PreprocessConfig | None:
    """C13 draws from three configs by name (properties/claims/test_served.py's geometry_configs)."""
    base = _session()
    if name == "session":
        return base
    if name == "kimi-k2.5":
        return profile("kimi-k2.5")
    if name == "F=64":
        return replace(base, fixed_output_tokens=64)
    return None


def fit_c13(
    ce: Any, failure: str, row: Mapping[str, Any] | None = None, *, engine: str = "sglang"
) -> dict[str, Any] | None:
    """C13's counterexample ``(width, height, config name)``; None for another, or where vLLM serves the
    checkpoint's remote code (the geometry is not vLLM's there)."""
    if not (isinstance(ce, list | tuple) and len(ce) == 3 and isinstance(ce[2], str)):
        return None
    try:
        width, height = int(ce[0]), int(ce[1])
    except (TypeError, ValueError):
        return None
    cfg = _geometry_config(ce[2])
    if cfg is None:
        return None
    found = repro_of(engine).geometry(row)
    if found is None:
        return None
    imports, geometry = found
    consts = _geometry_values(cfg, engine, f"the {ce[2]!r} config C13 drew it under")
    consts += f"SIZE = {(width, height)!r}  # (width, height) of the counterexample\n"
    return {"imports": imports, "consts": consts, "geometry": geometry}


def sglang_geometry(row: Mapping[str, Any] | None) -> tuple[str, str]:
    """(imports, geometry text) of SGLang's C13 file: ``navit_resize_config``, whatever the row."""
    return SGLANG_GEOMETRY_IMPORTS, SGLANG_GEOMETRY


def vllm_geometry(row: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(imports, geometry text) of vLLM's C13 file: the processor its provenance names; None where the row does not
    say or vLLM serves the checkpoint's remote code."""
    found = vllm_processor(row)
    if not found:
        return None
    imports = VLLM_GEOMETRY_IMPORTS.replace("$processor_module", found[0]).replace("$processor_class", found[1])
    return imports, VLLM_GEOMETRY


def fit_vllm_c15(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """vLLM's C15 counterexample, the (mean, std) pair whose levels differ; None for another, or where vLLM
    serves the checkpoint's remote code (C15 is not vLLM's there)."""
    stats = stats_pair(ce, failure, "levels differ from the checkpoint in FP32")
    serving = vllm_serving(row)
    if stats is None or serving is None or "ImageProcessor" not in serving["imports"]:
        return None
    mean, std = stats
    cfg = replace(
        _session(), patch_size=16, merge_kernel_size=1, in_patch_limit=1, patch_limit_on_one_side=1,
        fixed_output_tokens=None, image_mean=mean, image_std=std,
    )  # fmt: skip
    imports = serving["imports"].replace("import math\n\n", "")  # no resize decision here
    consts = _geometry_values(cfg, "vllm", "one 16x16 patch, served unresized; the claim's mean/std")
    return {**serving, "imports": imports, "consts": consts}
