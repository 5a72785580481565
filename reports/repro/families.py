"""The model families' reproducer templates (semantics §18): which fits a recorded row, and the values it states.

Why per family and path: a run under ``--model`` records a column per family and served path
(``qwen3-vl:VLLM``, ``internvl:SGLANG``), and a reproducer calls what that column served: vLLM's device
normalization (``FusedMMInputNorm.forward_native`` built by ``build_mm_input_norm``) on its default path, its
host path's values for C4, SGLang's and vLLM's InternVL tiling, SGLang's Qwen path (transformers' processor at
SGLang's pin). The trained side is stated in the file from deferlab's published configs
(`reference.system.family_configs`), never imported. Where the path computes with transformers and
torchvision, the file names them as companions (its engine's `EngineRepro.companions`): ``deferlab repro``
loads them at the release's pins (`reports.core.runner.run_with_engine`). A row no template fits gets no file (the caller says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from string import Template
from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.family_configs import family_profile, norm_of, published_config
from deferlab.reference.system.systems import DEFAULT_FAMILY, split_label
from deferlab.reports.repro import family_texts as texts
from deferlab.reports.repro.engines import repro_of
from deferlab.reports.repro.fitting import literal, stats_pair
from deferlab.reports.repro.served_texts import _NORMALIZE, ONE_LEVEL

TRANSPARENT = {"RGBA partly transparent": "RGBA", "LA": "LA"}  # the classes C14's InternVL file can draw itself
_SIZE = re.compile(r"AssertionError: \[(\d+)x(\d+)\]")
_LEVEL = re.compile(r"first level (\d+)")


@dataclass(frozen=True)
class Column:
    """Where a row was recorded: engine, family and served path (None: the default)."""

    engine: str
    family: str
    path: str | None

    @classmethod
    def of(cls, row: Mapping[str, Any], engine: str) -> Column:
        family, _, path = split_label(str(row.get("policy") or ""))
        return cls(engine, family, path)

    @property
    def companions(self) -> tuple[str, ...]:
        """The libraries the path computes with, at the release's pins (the engine's reproducers say)."""
        return tuple(repro_of(self.engine).companions.get(self.family, ()))


def _consts(**values: Any) -> str:
    return "".join(f"{name} = {value!r}\n" for name, value in values.items())


def _norm_consts(family: str) -> str:
    """The trained side's normalization (semantics §18.1) of the family's published config."""
    n = norm_of(family_profile(family))
    return _consts(RESCALE=n.rescale_factor, MEAN=list(n.image_mean), STD=list(n.image_std), DO_RESCALE=n.do_rescale,
                   DO_NORMALIZE=n.do_normalize)  # fmt: skip


def _layout(row: Mapping[str, Any]) -> str | None:
    """The layout vLLM built the family's norm with, from the row's provenance (``build_mm_input_norm(layout 'pcl')``)."""
    for text in (row.get("provenance") or {}).values():
        m = re.search(r"build_mm_input_norm\(layout '(\w+)'\)", str(text))
        if m is not None:
            return m.group(1)
    return None


def _card_consts(family: str) -> str:
    cfg = family_profile(family)
    return _consts(TILE=cfg.image_size, MIN_NUM=cfg.min_num, MAX_NUM=cfg.max_num, USE_THUMBNAIL=cfg.use_thumbnail)


def _published(family: str) -> str:
    cfg = published_config(family)
    return f"# The checkpoint's preprocessor_config.json (deferlab's published {family!r} profile):\nCFG = {cfg!r}\nNORM_CONFIG = CFG\n"  # fmt: skip


def _kimi(mean: Any = None, std: Any = None) -> str:
    """Kimi-K3's config as vLLM reads it: deferlab's session profile (with the counterexample's statistics) as
    the ``media_proc_cfg`` of the checkpoint's preprocessor_config.json."""
    from dataclasses import replace

    from deferlab.reference.system.profiles import DEFAULT_PROFILE, profile
    from deferlab.reports.repro.served import media_proc_cfg

    cfg = profile(DEFAULT_PROFILE)
    cfg = cfg if mean is None else replace(cfg, image_mean=mean, image_std=std)
    return f"# The checkpoint's media_proc_cfg (deferlab's {cfg.name!r} profile):\nCFG = {media_proc_cfg(cfg, 'vllm')!r}\nNORM_CONFIG = {{'media_proc_cfg': CFG}}\n"  # fmt: skip


# --- the fits: (imports, constants, body) or None -----------------------------------------------------------------------
def vllm_c15(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    layout = _layout(row)
    if c.path is not None or layout is None or "differ from the checkpoint in FP32" not in failure:
        return None
    served = texts._DEVICE_LEVELS + texts.VLLM_C15_SERVED
    if c.family == DEFAULT_FAMILY:  # its counterexample is the (mean, std) drawn; its trained side is §11.3's
        stats = stats_pair(ce, failure, "levels differ from the checkpoint in FP32")
        if stats is None:
            return None
        consts = _kimi(*stats) + _consts(LAYOUT=layout)
        return texts.VLLM_NORM_IMPORTS, consts, served + _NORMALIZE + texts.KIMI_TRAINED_LEVELS
    consts = _published(c.family) + _consts(LAYOUT=layout) + _norm_consts(c.family)
    return texts.VLLM_NORM_IMPORTS, consts, served + texts.TRAINED_LEVELS


def vllm_c4(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    level, layout = _LEVEL.search(failure), _layout(row)
    if c.path is not None or level is None or layout is None or "after BF16" not in failure:
        return None
    if c.family == DEFAULT_FAMILY:
        from deferlab.reports.repro.served import vllm_processor

        found = vllm_processor(row)
        if not found:
            return None
        (extra, host), consts = texts.VLLM_KIMI_HOST, _kimi()
        extra = extra.replace("$processor_module", found[0]).replace("$processor_class", found[1])
        host = host.replace("$processor_class", found[1])
    elif c.family in ("qwen2.5-vl", "qwen3-vl"):
        (extra, host), consts = texts.VLLM_QWEN_HOST, _published(c.family)
    else:
        return None
    consts += _consts(LAYOUT=layout, LEVEL=int(level.group(1))) + "# LEVEL: the level deferlab recorded\n"
    return texts.VLLM_NORM_IMPORTS + extra, consts, texts._DEVICE_LEVELS + host


def sglang_c15(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    cfg = family_profile(c.family) if c.family in FAMILIES else None
    if getattr(cfg, "kind", None) != "qwen" or "differ from the checkpoint in FP32" not in failure:
        return None
    consts = _published(c.family) + _norm_consts(c.family)
    consts += _consts(FACTOR=cfg.patch_size * cfg.merge_size, MIN_PIXELS=cfg.min_pixels)
    return texts.SGLANG_QWEN_IMPORTS, consts, texts.SGLANG_QWEN_SERVED + texts.TRAINED_LEVELS


def _size(ce: Any, failure: str) -> tuple[int, int] | None:
    """(width, height) of a geometry counterexample: the failure's ``[WxH]``, else a recorded (w, h) pair."""
    m = _SIZE.match(failure)
    if m is not None:
        return int(m.group(1)), int(m.group(2))
    got = literal(ce)
    if isinstance(got, list | tuple) and len(got) >= 2 and all(isinstance(v, int) for v in got[:2]):
        return int(got[0]), int(got[1])
    return None


def internvl_c13(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    size = _size(ce, failure)
    if c.family != "internvl" or size is None:
        return None
    extra, served = repro_of(c.engine).internvl_tiles
    consts = _card_consts(c.family) + _consts(SIZE=size) + "# (width, height) of the counterexample\n"
    return extra, consts, served + texts.INTERNVL_C13_TEST


def qwen_c13(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    cfg = family_profile(c.family) if c.family in FAMILIES else None
    size = _size(ce, failure)
    if getattr(cfg, "kind", None) != "qwen" or size is None:  # vLLM's fit (`reports.repro.engine_sets`)
        return None
    consts = _consts(FACTOR=cfg.patch_size * cfg.merge_size, MIN_PIXELS=cfg.min_pixels, MAX_PIXELS=cfg.max_pixels)
    return texts.QWEN_C13_IMPORTS, consts + _consts(SIZE=size), texts.QWEN_C13


def internvl_c14(c: Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    got = literal(ce)
    if c.family != "internvl" or not (isinstance(got, list | tuple) and len(got) == 4):  # vLLM's fit
        return None
    cls, width, height, seed = got
    if cls not in TRANSPARENT:
        return None
    consts = _card_consts(c.family) + _consts(MEAN=[0.485, 0.456, 0.406], STD=[0.229, 0.224, 0.225])
    consts += f"# An image of the recorded class {cls!r} and size:\n" + _consts(MODE=TRANSPARENT[cls], SIZE=(width, height), SEED=seed)  # fmt: skip
    return texts.INTERNVL_C14_IMPORTS, consts, texts._CARD_GRID + texts.INTERNVL_C14 + ONE_LEVEL


_WHAT = {
    "C4": "the device-finished values differ from the host-finished ones after the BF16 cast",
    "C13": "the served tiling or resize target differs from the checkpoint's",
    "C14": "the served pixels of an image are more than one level off the checkpoint's",
    "C15": "the served normalization differs from the checkpoint's float32 values",
}


def render(cid: str, ce: Any, failure: str, engine: str, row: Mapping[str, Any]) -> tuple[str, str, Column] | None:
    """(the test's code, what it reproduces, the column) of the family template fitting the row, or None. Kimi-K3's
    columns keep their own templates (`reports.repro.templates`) but for vLLM's C4 and its device path's C15."""
    from deferlab.reports.repro import video

    if cid in video.CLAIMS:  # the video and decoded-bytes claims, every column (semantics §20)
        return video.render(cid, ce, failure, Column.of(row, engine), row)
    c, repro = Column.of(row, engine), repro_of(engine)
    if c.family == DEFAULT_FAMILY and cid not in repro.kimi_family_claims:
        return None
    for fit in repro.family_fits.get(cid, ()):
        made = fit(c, ce, failure, row)
        if made is None:
            continue
        imports, consts, body = made
        served = repro.family_served
        test = texts.C15_TEST if cid == "C15" else texts.C4_TEST if cid == "C4" else ""
        where = c.path or "default path"
        code = Template(imports + "\n" + consts + body + test).safe_substitute(
            cid=cid.lower(), served=served, family=c.family, where=where
        )
        return code.lstrip("\n"), _WHAT[cid], c
    return None
