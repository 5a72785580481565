"""SGLang as a deferlab engine plugin: its registration and the family paths it declares itself, read by the
registry through the ``deferlab.engines`` entry point (`reference.system.engines`; the paths are merged into
`reference.system.families`). Plain data: this module imports only the description, so the registry can load it
before anything else of SGLang's driver."""

from __future__ import annotations

from deferlab.reference.system.engines import EngineFacts, Served

_PROCESSORS = "sglang.srt.multimodal.processors"
_ON_CPU = "the transformers processor on the fast-processor device (the CPU here), normalized there"


def _served(low: str, code: tuple[str, ...], note: str) -> Served:
    """SGLang's one default path (``served``) from ``low`` on, running the modules ``code``."""
    return Served("sglang", low, "", "served", True, code, note)


_QWEN = _served("0.5.17", (f"{_PROCESSORS}.qwen_vl", "transformers Qwen2VLImageProcessor"), _ON_CPU)

ENGINE = EngineFacts(
    name="sglang",
    display="SGLang",
    article="an",
    label="SGLANG",
    first_release="0.5.17",  # the first release with a Kimi-K3 processor (semantics §12.2)
    example_release="0.5.23",
    claims=None,
    suite="claims",
    sources="deferlab.impl.sglang.sources",
    image_bytes="deferlab.impl.sglang.image_bytes",  # its loader of a client's image bytes (C20, semantics §20.8)
    load_check="deferlab.impl.sglang.sources:load",
    driver="deferlab.impl.sglang.driver:SGLangImpl",
    column_prefix="",
    floor="no Kimi-K3 image path",
    order=0,
    seam="deferlab.impl.sglang.driver:SGLangImpl",  # the seam implementation: C1-C12 run on SGLang's own code
    video="deferlab.impl.sglang.video",
    hooks="deferlab.impl.sglang.hooks",
    repro="deferlab.reports.repro.engine_sets:SGLANG",  # its reproducer templates (`reports.repro`)
    mutate_baseline=True,  # reports/mutate_baseline.json is a sample of its campaign
    anchor=True,  # a checkout carries SGLang's own unit tests (`reports.mutate.anchor`)
    warm_fork=True,  # a fork of a loaded server runs a mutant as a new process would (reports.mutate.fork)
    serves=(
        (
            "kimi-k3",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.kimi_k3",),
                "eager producer and, from 0.5.18, the deferred owner path (semantics §3, §16)",
            ),
        ),
        ("qwen2.5-vl", _QWEN),
        ("qwen3-vl", _QWEN),
        (
            "internvl",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.internvl",),
                "SGLang's own: normalize, then tile and resize with torch on the device (the CPU here)",
            ),
        ),
        # MiMo-V2.5 (semantics §18.9): MiMoProcessor's own image path in every cached release (0.5.17-0.5.23).
        (
            "mimo-v2.5",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.mimo_v2",),
                "SGLang's own: resize and standardize with its module's mean/std (ImageNet's to 0.5.21), judged only",
            ),
        ),
        # ERNIE-4.5-VL (semantics §18.9): its own _pixel_values_norm in every cached release (0.5.17-0.5.23).
        (
            "ernie-4.5-vl",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.ernie45_vl",),
                "SGLang's own normalization of the checkpoint processor's levels (_pixel_values_norm), judged only",
            ),
        ),
        # GLM-4.1V (semantics §18.9): no resize or normalization of SGLang's own in any cached release (0.5.17-0.5.23).
        (
            "glm-4.1v",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.glm4v", "transformers Glm4vImageProcessor"),
                "SGLang's own loader, then transformers' processor on the fast-processor device (the CPU here)",
            ),
        ),
        # Gemma 4 (semantics §18.9): no resize or normalization of SGLang's own in any cached release (0.5.17-0.5.23).
        (
            "gemma4",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.gemma4", "transformers Gemma4ImageProcessor"),
                "SGLang's base loader, then transformers' processor on the fast-processor device (the CPU here)",
            ),
        ),
        # MiniCPM-V 4.6 (semantics §18.9): SGLang's own image processor in every cached release (0.5.17-0.5.23).
        (
            "minicpm-v-4.6",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.minicpmv4_6",),
                "SGLang's own: slice, resize and normalize with torch (its own mean/std); geometry and normalization judged",
            ),
        ),
        # PaddleOCR-VL (semantics §18.9): from 0.5.21, the first release whose Qwen-VL processor has the
        # prepare_artifact_batch deferlab's path runs.
        (
            "paddleocr-vl",
            _served(
                "0.5.21",
                (f"{_PROCESSORS}.paddleocr_vlm", "transformers PaddleOCRVLImageProcessor"),
                "SGLang's Qwen-VL processor subclass: transformers' processor on the fast-processor device (the "
                "CPU here), normalized there",
            ),
        ),
        # Step3-VL (semantics §18.9): its own Step3VLProcessor in every cached release (0.5.17-0.5.23).
        (
            "step3-vl",
            _served(
                "0.5.17",
                (f"{_PROCESSORS}.step3_vl",),
                "SGLang's own: window, then ToTensor and Normalize with its class's CLIP constants, judged only",
            ),
        ),
    ),
)
