"""SGLang's Kimi-K3 paths as `ServedPath`s (`impl.served.SeamPath` over the loaded `SGLangImpl`).

The prompt's image tokens and the geometry are SGLang's ``navit_resize_config``,
the function its processor expands the prompt with. A release without the
deferred path (0.5.17) has only the eager one.
"""

from __future__ import annotations

from deferlab.impl.served import SeamPath
from deferlab.impl.sglang.driver import LABEL, SGLangImpl

K25 = "sglang.srt.multimodal.processors.kimi_k25"


def paths(impl: SGLangImpl) -> list[SeamPath]:
    """Every path the loaded release has: eager, and deferred where it exists."""
    names = ["eager"] + (["deferred"] if impl.has_deferred_path else [])
    serve = {
        "eager": "the Kimi-K3 producer's eager branch (KimiK3ImageProcessor), its items' feature",
        "deferred": f"{K25}._gpu_preprocess_images with the hooks KimiK3ForConditionalGeneration.get_image_feature "
        "builds",
    }
    return [
        SeamPath(
            impl,
            name,
            label=LABEL,
            system=impl.name,
            resize_config=impl.navit_resize_config,
            provenance={
                "serve": serve[name],
                "num_tokens": f"{K25}.navit_resize_config",
                "geometry": f"{K25}.navit_resize_config",
            },
        )
        for name in names
    ]
