"""The Qwen2.5-VL / Qwen3-VL pixel reproducer (C14 on a Qwen column, semantics §16.2, §18.2): which recorded row it
fits, and the values it states (its texts are `reports.repro.qwen_pixels_texts`).

Why this shape: a Qwen column's C14 counterexample is ``(image class, width, height, seed)``
(`properties.claims.test_families.cases`), the image deferlab draws with `properties.strategies.served.make_image`;
the file draws it the same way (its draws restated, `reports.repro.qwen_pixels_texts.DRAW`), so it runs with nothing
of deferlab and states the case as recorded. The served side is the engine's own image path for the column, as its plugin names it
(`reports.repro.engines.EngineRepro.qwen_pixels`: SGLang's ``QwenVLImageProcessor``, vLLM's parser and the
transformers processor it builds), read off the row's recorded provenance where the path depends on it; the trained
side is transformers' PIL backend for the family's published config (semantics §18.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.family_configs import family_profile, published_config
from deferlab.reference.system.served import IMAGE_CLASSES
from deferlab.reports.repro import qwen_pixels_texts as texts
from deferlab.reports.repro.engines import repro_of
from deferlab.reports.repro.fitting import literal

MAX_SIDE = 40  # C14's drawn images are at most 40x40 (test_families.cases)


def _provenance(row: Mapping[str, Any] | None, key: str) -> str | None:
    """The row's provenance entry ``...: key`` (its recorded words for one step of the served path), or None."""
    for name, text in ((row or {}).get("provenance") or {}).items():
        if str(name).endswith(f": {key}"):
            return str(text)
    return None


def sglang_served(row: Mapping[str, Any] | None) -> tuple[str, str, str] | None:
    """(imports, constants, served text) of SGLang's Qwen image path: ``LOAD_FIRST`` where the recorded load step
    went through ``_load_single_item`` (Qwen2.5-VL's default, the preprocess cache off); None where it does not say."""
    load = _provenance(row, "load")
    if load is None:
        return None
    first = "_load_single_item" in load
    why = "through _load_single_item first" if first else "through the artifact path alone"
    consts = f"LOAD_FIRST = {first!r}  # the recorded load step: {why}\n"
    return texts.SGLANG_IMPORTS, consts, texts.SGLANG_SERVED


def vllm_served(row: Mapping[str, Any] | None) -> tuple[str, str, str] | None:
    """(imports, constants, served text) of vLLM's Qwen image path: ``OVERRIDES`` turn rescale and normalize off
    where the recorded serve step says the release merged them off (its device-normalized path); None where the
    row does not say."""
    serve = _provenance(row, "serve")
    if serve is None or "Qwen2VLImageProcessor" not in serve:
        return None
    device = "do_rescale and do_normalize off" in serve
    overrides = {"do_rescale": False, "do_normalize": False} if device else {}
    where = "the default device-normalized path" if device else "the host-normalized path"
    return texts.VLLM_IMPORTS, f"OVERRIDES = {overrides!r}  # the recorded serve step: {where}\n", texts.VLLM_SERVED


def image_code(cls: str, width: int, height: int, seed: int) -> str:
    """``CASE`` and the functions that draw its image as deferlab draws it (`texts.IMAGE`: the class's ``_draw`` and
    the helpers it calls)."""
    body = texts.DRAW[cls]
    helpers = [text for name, text in texts.HELPERS.items() if f"{name}(" in body]
    if "_palette(" in body:
        helpers.insert(0, texts.HELPERS["_u8"])  # the palette's alpha band is drawn with it
    head = f"# deferlab's minimal counterexample (image class, width, height, seed):\nCASE = {(cls, width, height, seed)!r}\n"
    return head + "".join(dict.fromkeys(helpers)) + texts.IMAGE.replace("$draw", body).replace("$cls", repr(cls))


def _case(ce: Any) -> tuple[str, int, int, int] | None:
    got = literal(ce)
    if not (isinstance(got, list | tuple) and len(got) == 4 and got[0] in IMAGE_CLASSES):
        return None
    cls, *rest = got
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in rest):
        return None
    width, height, seed = rest
    if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE and seed >= 0):
        return None
    return cls, width, height, seed


def qwen_c14(c: Any, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(imports, constants, body) of the reproducer of a Qwen column's C14 row (`reports.repro.families` fit), or
    None: another family, a counterexample that is not a drawn case, an engine or row whose served path is unknown."""
    cfg = family_profile(c.family) if c.family in FAMILIES else None
    case = _case(ce)
    found = repro_of(c.engine).qwen_pixels(row) if getattr(cfg, "kind", None) == "qwen" and case else None
    if found is None or case is None:
        return None
    imports, path, served = found
    consts = f"# The checkpoint's preprocessor_config.json (deferlab's published {c.family!r} profile):\n"
    consts += f"CFG = {published_config(c.family)!r}\n" + path
    return texts.COMMON_IMPORTS + imports, consts, image_code(*case) + texts.COMMON + served + texts.C14_TEST
