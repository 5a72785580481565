"""vLLM as a deferlab engine plugin: its registration and the family paths it declares itself, read by the
registry through the ``deferlab.engines`` entry point (`reference.system.engines`; the paths are merged into
`reference.system.families`). Plain data: this module imports only the description.

`NORM` is the one table of the normalization-only families (semantics §18.3, §18.9): their ``serves`` rows are
built from it here and `impl.vllm.served` builds their paths from it, so such a family is one row here.
"""

from __future__ import annotations

from dataclasses import replace

from deferlab.reference.system.engines import EngineFacts, Served

_NORM = "vllm.model_executor.layers.fusion.mm_input_norm.FusedMMInputNorm.forward_native"
_DEVICE = (
    "vLLM's default (mm_device_do_normalize on for a class declaring supports_mm_device_do_normalize): the "
    "processor leaves rescale and normalize out, uint8 travels to the device, FusedMMInputNorm finishes there"
)
_HOST = "mm_device_do_normalize off: the processor rescales and normalizes on the host (not the default)"
_QWEN = "transformers Qwen2VLImageProcessor"

# The families vLLM ships raw and finishes with its own device normalization (its supports_mm_device_do_normalize
# classes, judged on normalization only): family -> (model class, its module under vllm/model_executor/models/,
# the first release that declares it). The Nemotron classes (semantics §18.9): the embedding model (its norm
# vLLM's SigLIP constants), Parse (the processor config's), Nano VL (config.json's norm_mean / norm_std).
NORM: dict[str, tuple[str, str, str]] = {
    "glm-4.1v": ("Glm4vForConditionalGeneration", "glm4_1v", "0.32.0"),
    "mistral3": ("Mistral3ForConditionalGeneration", "mistral3", "0.32.0"),
    "gemma3": ("Gemma3ForConditionalGeneration", "gemma3_mm", "0.34.0"),
    "gemma4": ("Gemma4ForConditionalGeneration", "gemma4_mm", "0.34.0"),
    "nemotron-vl": ("LlamaNemotronVLForEmbedding", "nemotron_vl", "0.32.0"),
    "nemotron-parse": ("NemotronParseForConditionalGeneration", "nemotron_parse", "0.33.0"),
    "nano-nemotron-vl": ("NemotronH_Nano_VL_V2", "nano_nemotron_vl", "0.34.0"),
}


def _on_device(low: str, code: tuple[str, ...]) -> Served:
    """vLLM's default from ``low`` on: ``code`` leaves rescale and normalize to FusedMMInputNorm on the device."""
    return Served("vllm", low, "", "device-normalized", True, (*code, _NORM), _DEVICE)


def _norm_only(low: str, code: tuple[str, ...]) -> Served:
    """`_on_device` for a family vLLM normalizes only: `family.NormPath` answers no geometry or pixel claim."""
    return replace(_on_device(low, code), judges=())


def _device_and_host(low: str, code: tuple[str, ...]) -> tuple[Served, Served]:
    """vLLM from ``low`` on: the default device-normalized path and the host-normalized one (not the default)."""
    return _on_device(low, code), Served("vllm", low, "", "host-normalized", False, code, _HOST)


def _qwen(family: str, module: str, host_high: str, device_low: str, host_note: str) -> tuple[tuple[str, Served], ...]:
    """A Qwen-VL family: the transformers processor normalized on the host up to ``host_high`` (``host_note`` says
    why) and on the device by default from ``device_low``."""
    code = (f"vllm.model_executor.models.{module}", _QWEN)
    found = (Served("vllm", "0.27.0", host_high, "host-normalized", True, code, host_note),)
    return tuple((family, s) for s in (*found, *_device_and_host(device_low, code)))


ENGINE = EngineFacts(
    name="vllm",
    display="vLLM",
    article="a",
    label="VLLM",
    first_release="0.27.0",  # the first release with a Kimi-K3 image path (semantics §16.1)
    example_release="0.33.0",
    # served vs trained, and device-finished vs host-finished; C1-C12 are about SGLang's PR (semantics §16.2, §18)
    claims=("C4", "C13", "C14", "C15", "C16", "C17", "C18", "C19", "C20"),  # C16-C20: requests as sent (§20)
    suite="claims",
    sources="deferlab.impl.vllm.sources",
    image_bytes="deferlab.impl.vllm.image_bytes",  # its loader of a client's image bytes (C20, semantics §20.8)
    load_check="deferlab.impl.vllm.driver:VLLMPath",  # the driver built on the tree: what serving needs
    driver="deferlab.impl.vllm.driver:VLLMPath",
    column_prefix="vllm-",
    floor="no Kimi-K3 image path",
    order=1,
    served="deferlab.impl.vllm.served",  # its paths per family (no seam: only what it serves is judged)
    video="deferlab.impl.vllm.video",
    hooks="deferlab.impl.vllm.hooks",
    repro="deferlab.reports.repro.engine_sets:VLLM",  # its reproducer templates (`reports.repro`)
    serves=(
        (
            "kimi-k3",
            Served(
                "vllm",
                "0.27.0",
                "0.31.0",
                "served",
                True,
                ("vllm.models.kimi_k3.common.mm_preprocess",),
                "the checkpoint's remote-code processor behind vLLM's parser (semantics §16.1)",
            ),
        ),
        *(
            ("kimi-k3", s)
            for s in _device_and_host("0.32.0", ("vllm.transformers_utils.processors.kimi_k25_vision_fused",))
        ),
        *_qwen(
            "qwen2.5-vl",
            "qwen2_5_vl",
            "0.30.0",
            "0.31.0",
            "before mm_device_do_normalize (0.31.0): the processor normalizes on the host",
        ),
        *_qwen(
            "qwen3-vl",
            "qwen3_vl",
            "0.31.0",
            "0.32.0",
            "before Qwen3-VL declared mm_device_do_normalize (0.32.0): normalized on the host",
        ),
        (
            "internvl",
            Served(
                "vllm",
                "0.27.0",
                "",
                "served",
                True,
                ("vllm.transformers_utils.processors.internvl",),
                "vLLM's own processor: the model card's tiling, normalized on the host (no device norm)",
            ),
        ),
        *(
            (name, _norm_only(low, (f"vllm.model_executor.models.{module}",)))
            for name, (_, module, low) in NORM.items()
        ),
    ),
)
