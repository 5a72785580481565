"""Model families, the second axis of the registry of systems under test (semantics §18).

A family is a set of checkpoints that share one image processor: what the model was trained on (the
*trained side*: the processor class a checkpoint's ``preprocessor_config.json`` names, run for real where
transformers ships it, or deferlab's NumPy restatement where the checkpoint ships its own code), and, per
engine and range of releases, the path that engine serves it with (the *served side*: the engine's own
code, which may finish the preprocessing on the device). ``scope`` says which claims a family is judged on:
``full`` (geometry C13, pixels C14, normalization C15, deferral C4 where an engine finishes on the device)
or ``geometry`` (C13 and C15, and C4: a family whose pixels are not restated: GLM-4.1V) or ``normalization``
(C15, and C4 where the engine finishes on the device), for the families whose pixels
an engine ships raw and only normalizes on the device.

Facts only, module paths as strings (this room imports nothing of ``impl``): every value is stated, with
its source, in ``docs/semantics.md`` §18. This table holds the families; each engine's paths are declared in its
own package (its plugin's ``serves``, `reference.system.engines.EngineFacts`) and merged in by the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from deferlab.reference.system.engines import ENGINES, Served
from deferlab.reference.system.errors import DeferlabInputError

SCOPES = ("full", "geometry", "normalization")
FULL_CLAIMS = ("C4", "C13", "C14", "C15")
NORMALIZATION_CLAIMS = ("C4", "C15")
GEOMETRY_CLAIMS = ("C4", "C13", "C15")  # geometry and normalization, the pixels not restated (MiniCPM-V 4.6)
VIDEO_CLAIMS = ("C16", "C17", "C18", "C19")  # a family whose checkpoint names a video processor (semantics §20)
BYTES_CLAIMS = ("C20",)  # every family: the decode of a client's bytes comes before any processor (semantics §20.8)


@dataclass(frozen=True)
class Family:
    """One model family: its checkpoints, the processor classes their configs name, the trained side, the
    default published config, and what each engine serves it with (declared in the engine's package)."""

    name: str
    display: str
    scope: str
    checkpoints: tuple[str, ...]
    processor_classes: tuple[str, ...]
    trained: str
    profile: str
    served: tuple[Served, ...] = ()  # its engines' paths: each plugin's ``serves``, merged below
    needs: tuple[str, ...] = ()  # optional extras the trained side needs (reference.system.extras)
    video: bool = False  # its checkpoints name a video processor: the video claims apply (semantics §20.1)
    encoded: bool = True  # C20 is judged in its columns (Kimi-K3's engine paths are judged on decoded images, §16)
    # C14's impact remakes each realistic image at this size (semantics §21.7: its mode and alpha matter, not its
    # size): the smallest the checkpoint serves in its fewest pieces, so the measurement stays within its budget
    remade: tuple[int, int] = (16, 12)

    @property
    def claims(self) -> tuple[str, ...]:
        still = {"full": FULL_CLAIMS, "geometry": GEOMETRY_CLAIMS}.get(self.scope, NORMALIZATION_CLAIMS)
        return (*still, *(VIDEO_CLAIMS if self.video else ()), *(BYTES_CLAIMS if self.encoded else ()))

    def paths(self, engine: str, version: str) -> tuple[Served, ...]:
        """The engine's paths for this family at ``version`` (empty: the release does not serve it)."""
        return tuple(s for s in self.served if s.covers(engine, version))

    def engines(self) -> tuple[str, ...]:
        return tuple(e for e in ENGINES if any(s.engine == e for s in self.served))

    def not_served(self, engine: str, version: str) -> str | None:
        """None when ``version`` of ``engine`` serves this family; else the ``n/a`` reason in one line."""
        if self.paths(engine, version):
            return None
        ranges = list(
            dict.fromkeys(
                f"{s.low}-{s.high}" if s.high else f"{s.low} and later" for s in self.served if s.engine == engine
            )
        )
        if not ranges:
            return f"n/a: no {ENGINES[engine].display} path for {self.display} is checked (semantics §18)"
        return f"n/a: {ENGINES[engine].display} {version} does not serve {self.display} (served by {', '.join(ranges)})"


def _qwen(name: str, display: str, checkpoints: tuple[str, ...], config_class: str) -> Family:
    """A Qwen-VL family: the transformers Qwen2VL processor (its engines' paths are their plugins' ``serves``)."""
    return Family(
        name=name,
        display=display,
        scope="full",
        checkpoints=checkpoints,
        processor_classes=(
            "Qwen2VLImageProcessor",
            "Qwen2VLImageProcessorFast",
            config_class,
            "Qwen2VLImageProcessorPil",
        ),
        trained="transformers:transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.Qwen2VLImageProcessorPil",
        profile=name,
        needs=("transformers",),
        video=True,  # Qwen2VLVideoProcessor / Qwen3VLVideoProcessor in video_preprocessor_config.json (§20.1)
    )


FAMILIES: dict[str, Family] = {
    "kimi-k3": Family(
        name="kimi-k3",
        encoded=False,
        display="Kimi-K2.5/K3",
        scope="full",
        checkpoints=("moonshotai/Kimi-K3", "moonshotai/Kimi-K2.5"),
        processor_classes=("KimiK25VisionProcessor", "KimiK3VisionProcessor", "MoonViTMediaProcessor"),
        trained="deferlab.reference.oracle.checkpoint",  # restated: the checkpoint ships its own code
        profile="kimi-k3",
    ),
    "qwen2.5-vl": _qwen(
        "qwen2.5-vl",
        "Qwen2.5-VL",
        ("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-72B-Instruct"),
        "Qwen2_5_VLImageProcessor",
    ),
    "qwen3-vl": _qwen(
        "qwen3-vl",
        "Qwen3-VL",
        ("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3.5-0.8B"),
        "Qwen3VLProcessor",
    ),
    "internvl": Family(
        name="internvl",
        display="InternVL 2.5/3",
        scope="full",
        checkpoints=("OpenGVLab/InternVL3-8B", "OpenGVLab/InternVL2_5-8B"),
        processor_classes=(
            "InternVLChatModel",
            "GotOcr2ImageProcessor",
            "GotOcr2ImageProcessorFast",
            "InternVLProcessor",
        ),
        trained="deferlab.reference.oracle.internvl",  # restated from the model card's load_image
        profile="internvl",
        remade=(12, 12),  # one 448-pixel tile on the card's rule; 16x12 (4:3) makes 12 tiles and a thumbnail
    ),
}

# Families an engine ships raw and finishes with its own device normalization (vLLM's
# supports_mm_device_do_normalize classes, `impl.vllm.plugin.NORM`): judged on normalization only (semantics §18.3).
for _name, _display, _checkpoint, _classes in (
    ("glm-4.1v", "GLM-4.1V", "zai-org/GLM-4.1V-9B-Thinking", ("Glm4vImageProcessor",)),
    (
        "mistral3",
        "Mistral 3",
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        ("PixtralImageProcessor", "PixtralImageProcessorFast"),
    ),
    ("gemma3", "Gemma 3", "google/gemma-3-4b-it", ("Gemma3ImageProcessor", "Gemma3ImageProcessorFast")),
    ("gemma4", "Gemma 4", "google/gemma-4", ("Gemma4ImageProcessor",)),
    # The Nemotron classes that declare it (semantics §18.9).
    (
        "nemotron-vl",
        "Nemotron VL",
        "nvidia/llama-nemotron-embed-vl-1b-v2",
        ("LlamaNemotronVLModel", "LlamaNemotronVLForSequenceClassification"),
    ),
    ("nemotron-parse", "Nemotron Parse", "nvidia/NVIDIA-Nemotron-Parse-v1.1", ("NemotronParseImageProcessor",)),
    ("nano-nemotron-vl", "Nano Nemotron VL", "nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16", ("NemotronH_Nano_VL_V2",)),
):
    FAMILIES[_name] = Family(
        name=_name,
        display=_display,
        scope="normalization",
        checkpoints=(_checkpoint,),
        processor_classes=_classes,
        trained="deferlab.reference.oracle.family_norm",  # the config's rescale and normalize, transformers' arithmetic
        profile=_name,
    )

# GLM-4.1V (semantics §18.9): judged in full, its checkpoint's Glm4vImageProcessorPil restated (reference.oracle.glm4v:
# smart_resize, and the pixels since 2026-12-07) and SGLang's path computing both; a path that ships its pixels raw
# (vLLM's) answers C13 and C14 ``n/a`` by its own ``judged_claims`` (properties/claims/test_families.py).
# Its checkpoint names a video processor (Glm4vVideoProcessor, semantics §20.4): the video claims apply.
FAMILIES["glm-4.1v"] = replace(
    FAMILIES["glm-4.1v"], scope="full", trained="deferlab.reference.oracle.glm4v", video=True
)
# Gemma 4's checkpoints name a video processor too (Gemma4VideoProcessor, semantics §20.10(a)): the video claims apply.
FAMILIES["gemma4"] = replace(FAMILIES["gemma4"], video=True)

# PaddleOCR-VL (semantics §18.9): SGLang's own Qwen-VL processor subclass over transformers' processor, in full.
FAMILIES["paddleocr-vl"] = Family(
    name="paddleocr-vl",
    display="PaddleOCR-VL",
    scope="full",
    checkpoints=("PaddlePaddle/PaddleOCR-VL",),
    processor_classes=("PaddleOCRVLImageProcessor", "PaddleOCRVLImageProcessorFast"),
    trained="deferlab.reference.oracle.paddleocr",  # restated from transformers' PIL backend (semantics §18.9)
    profile="paddleocr-vl",
    needs=("transformers",),
)

# MiniCPM-V 4.6 (semantics §18.9): SGLang's own image processor (its own statistics and slicing), judged on geometry
# (the slice grid, sizes and tokens: reference.oracle.minicpm_v) and normalization; its pixels are not restated.
FAMILIES["minicpm-v-4.6"] = Family(
    name="minicpm-v-4.6",
    display="MiniCPM-V 4.6",
    scope="geometry",
    checkpoints=("openbmb/MiniCPM-V-4.6",),
    processor_classes=("MiniCPMV4_6ImageProcessor",),
    trained="deferlab.reference.oracle.minicpm_v",  # transformers' MiniCPMV4_6ImageProcessorPil, restated
    profile="minicpm-v-4.6",
)

# ERNIE-4.5-VL (semantics §18.9): SGLang's own loading and pre-resize before the checkpoint's processor, and its own
# _pixel_values_norm; judged in full (C14 since 2026-12-06, its pixels restated from the Pil processor).
FAMILIES["ernie-4.5-vl"] = Family(
    name="ernie-4.5-vl",
    display="ERNIE-4.5-VL",
    scope="full",
    checkpoints=("baidu/ERNIE-4.5-VL-28B-A3B-PT", "baidu/ERNIE-4.5-VL-424B-A47B-PT"),
    processor_classes=("Ernie4_5_VLMoeImageProcessor",),
    trained="deferlab.reference.oracle.ernie45_vl",  # transformers' Ernie4_5_VLMoeImageProcessorPil, restated
    profile="ernie-4.5-vl",
)

# MiMo-V2.5 (semantics §18.9): SGLang's own MiMoProcessor resizes and standardizes with module constants; judged in
# full (C14 since 2026-12-06, against its checkpoint's Qwen2VLImageProcessor).
FAMILIES["mimo-v2.5"] = Family(
    name="mimo-v2.5",
    display="MiMo-V2.5",
    scope="full",
    checkpoints=("XiaomiMiMo/MiMo-V2.5",),
    processor_classes=("MiMoV2ForCausalLM",),
    trained="deferlab.reference.oracle.qwen",  # its Qwen2VLImageProcessor: Qwen's rule and pixels (ernie45_vl.mimo_preprocess)
    profile="mimo-v2.5",
)

# Step3-VL (semantics §18.9): SGLang's own Step3VLProcessor (ToTensor, Normalize with its CLIP constants); judged on
# normalization only (the checkpoint's remote-code windowing rule is unread).
FAMILIES["step3-vl"] = Family(
    name="step3-vl",
    display="Step3-VL",
    scope="normalization",
    checkpoints=("stepfun-ai/step3",),
    processor_classes=("Step3VLForConditionalGeneration",),
    trained="deferlab.reference.oracle.family_norm",  # its remote code's ToTensor then Normalize(CLIP): §18.1's table
    profile="step3-vl",
)

# Each engine plugin declares its own paths for the families it serves (`EngineFacts.serves`: SGLang's, vLLM's and
# LMDeploy's in `impl/<engine>/plugin.py`), added here in the registry's order, so an engine's paths live in its
# package and this table holds the families themselves.
for _facts in ENGINES.values():
    for _family, _path in _facts.serves:
        if _family in FAMILIES and _path.engine == _facts.name:
            FAMILIES[_family] = replace(FAMILIES[_family], served=(*FAMILIES[_family].served, _path))

DEFAULT = "kimi-k3"


def family(name: str) -> Family:
    """The family ``name``; `DeferlabInputError` in one line with the accepted names."""
    found = FAMILIES.get(str(name).strip().lower())
    if found is None:
        raise DeferlabInputError(f"unknown model family {name!r}; accepted: {', '.join(FAMILIES)}")
    return found


def of_processor(class_name: str) -> list[Family]:
    """The families whose checkpoints' configs may name ``class_name`` (several: Qwen2.5-VL and Qwen3-VL share
    one processor class; their config values tell them apart)."""
    return [f for f in FAMILIES.values() if class_name in f.processor_classes]


def of_config(config: dict, where: str = "preprocessor_config.json") -> Family:
    """The family whose processor a checkpoint's ``preprocessor_config.json`` names (``--checkpoint DIR``): a
    Kimi config (``media_proc_cfg``) is Kimi-K3's; else ``image_processor_type`` (or ``processor_class``) among the
    families' classes, Qwen2.5-VL and Qwen3-VL (one class) told apart by ``patch_size`` (14, 16: semantics §18.5).
    `DeferlabInputError` in one line when no family has the class."""
    if isinstance(config.get("media_proc_cfg"), dict) or "in_patch_limit" in config:
        return FAMILIES[DEFAULT]
    name = str(config.get("image_processor_type") or config.get("processor_class") or "")
    found = of_processor(name)
    shared = len(found) > 1
    if shared:
        by_patch = {14: "qwen2.5-vl", 16: "qwen3-vl"}
        chosen = by_patch.get(config.get("patch_size"))  # type: ignore[arg-type]
        found = [f for f in found if f.name == chosen]
    if len(found) != 1:
        known = sorted({c for f in FAMILIES.values() for c in f.processor_classes})
        raise DeferlabInputError(
            f"{where}: processor class {name or '(none named)'!r} is no checked family's"
            + (f" with patch_size {config.get('patch_size')!r} (14: Qwen2.5-VL, 16: Qwen3-VL)" if shared else "")
            + f"; accepted: {', '.join(known)}, or a Kimi media_proc_cfg"
        )
    return found[0]
