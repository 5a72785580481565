"""The reproducers of deferlab's own engines (`reports.repro.engines.EngineRepro`), named by each plugin's ``repro``
(``deferlab.reports.repro.engine_sets:SGLANG``): which templates, fits and texts are whose.

Why one table: the texts and the fits are engine-free code in `reports.repro`; this says which an engine's rows
take, so a fit never tests the engine's name. An engine outside deferlab names its own set.
"""

from __future__ import annotations

from deferlab.reports.repro import families, qwen_pixels, served, sglang_families, templates, vllm_norm_direct
from deferlab.reports.repro import family_texts as texts
from deferlab.reports.repro.engines import EngineRepro

# The libraries a path computes with, at the release's pins: what the engine's sessions load
# (`impl.vllm.served.COMPANIONS`, `impl.sglang.families.PATHS`; a test keeps them equal).
_BOTH = ("transformers", "torchvision")
_SGLANG_FAMILIES = ("qwen2.5-vl", "qwen3-vl", "ernie-4.5-vl", "mimo-v2.5", "minicpm-v-4.6", "paddleocr-vl", "glm-4.1v")

SGLANG = EngineRepro(
    templates=templates.sglang_templates,
    family_fits={
        "C15": (families.sglang_c15, sglang_families.minicpm_c15),
        "C13": (families.internvl_c13, sglang_families.own_c13),
        "C14": (qwen_pixels.qwen_c14, sglang_families.own_c14),
    },
    family_served="SGLang's served path",
    internvl_tiles=texts.SGLANG_INTERNVL_TILES,
    companions={f: _BOTH for f in (*_SGLANG_FAMILIES, "gemma4")},  # Gemma 4: semantics §20.10(b)
    serving=served.sglang_serving,
    geometry=served.sglang_geometry,
    geometry_args=True,
    qwen_pixels=qwen_pixels.sglang_served,
)
VLLM = EngineRepro(
    templates=templates.vllm_templates,
    family_fits={
        "C15": (families.vllm_c15, vllm_norm_direct.vllm_c15_direct),
        "C4": (families.vllm_c4,),
        "C13": (families.internvl_c13, families.qwen_c13),
        "C14": (families.internvl_c14, qwen_pixels.qwen_c14),
    },
    kimi_family_claims=("C4", "C15"),  # its Kimi-K3 column's C4 and device path's C15 take the family templates
    family_served="vLLM's device normalization",
    internvl_tiles=texts.VLLM_INTERNVL_TILES,
    companions={f: _BOTH for f in ("qwen2.5-vl", "qwen3-vl", "internvl", "glm-4.1v", "gemma4")},
    serving=served.vllm_serving,
    geometry=served.vllm_geometry,
    media_proc_defaults=served.vllm_media_proc_defaults,
    qwen_pixels=qwen_pixels.vllm_served,
)
LMDEPLOY = EngineRepro(
    companions={"qwen3-vl": _BOTH},  # its video reproducers' trained side (`reports.repro.video`)
)
