"""What a client sends, described (semantics §20): the encoded image classes C20 judges (semantics §20.8) and the
checkpoints' video processor configs the video claims' trained side is built from (semantics §20.4).

Why in the description room: the generators (``properties.strategies.encoded``), the trained sides
(``properties.video_trained``) and the reproducers (``reports.repro``) name the same classes and configs; the
reproducers may not import the checks, so the names live here.
"""

from __future__ import annotations

from typing import Any

from deferlab.reference.system.errors import InputValueError

ENCODED_CLASSES: tuple[str, ...] = (
    "RGB JPEG",
    "RGB PNG",
    *(f"JPEG EXIF {n}" for n in range(1, 9)),
    "CMYK JPEG",
    "YCCK JPEG",
    "progressive JPEG",
    "I;16 PNG",
    "I TIFF",
    "P PNG tRNS",
    "LA PNG",
    "RGBA PNG",
    "ICC PNG",
    "animated GIF",
    "animated WebP",
    "APNG",
    "truncated JPEG",
    "truncated PNG",
    "corrupt JPEG",
    "bomb PNG",
    "YCbCr TIFF",
    "broken BLP",
)

# The media type a client's data URI names, per class (the file's extension follows it).
_FORMATS = {"JPEG": ("image/jpeg", ".jpg"), "PNG": ("image/png", ".png"), "GIF": ("image/gif", ".gif"),
            "WebP": ("image/webp", ".webp"), "TIFF": ("image/tiff", ".tiff"), "APNG": ("image/png", ".png"),
            "BLP": ("image/x-blp", ".blp")}  # fmt: skip


def media_type(cls: str) -> tuple[str, str]:
    """(MIME type, file extension) of ``cls``'s bytes, as a client names them."""
    _known(cls)
    return next(v for k, v in _FORMATS.items() if k in cls.split())


def _known(cls: str) -> None:
    if cls not in ENCODED_CLASSES:
        raise InputValueError(f"unknown encoded image class {cls!r}; accepted: {', '.join(ENCODED_CLASSES)}")


_QWEN3_VIDEO = {"size": {"longest_edge": 25165824, "shortest_edge": 4096}, "patch_size": 16, "merge_size": 2,
                "temporal_patch_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                "processor_class": "Qwen3VLProcessor", "video_processor_type": "Qwen3VLVideoProcessor"}  # fmt: skip
_QWEN25 = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
           "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
           "image_std": [0.26862954, 0.26130258, 0.27577711], "image_processor_type": "Qwen2VLImageProcessor",
           "processor_class": "Qwen2_5_VLProcessor"}  # fmt: skip
_GLM4V_VIDEO = {"size": {"longest_edge": 47040000, "shortest_edge": 12544}, "fps": 2, "num_frames": 16,
                "do_sample_frames": True, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
                "max_image_size": {"longest_edge": 47040000}, "resample": 3, "do_rescale": True,
                "rescale_factor": 0.00392156862745098, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711], "processor_class": "Glm4vProcessor",
                "video_processor_type": "Glm4vVideoProcessor"}  # fmt: skip
_GEMMA4_VIDEO = {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
                 "do_sample_frames": True, "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0],
                 "max_soft_tokens": 70, "num_frames": 32, "patch_size": 16, "pooling_kernel_size": 3, "resample": 3,
                 "rescale_factor": 0.00392156862745098, "return_metadata": False,
                 "video_processor_type": "Gemma4VideoProcessor"}  # fmt: skip
# family -> (the dict from_dict is handed, where it comes from)
VIDEO_CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "qwen2.5-vl": (_QWEN25, "Qwen/Qwen2.5-VL-7B-Instruct ships no video_preprocessor_config.json: transformers "
                   "builds the video processor from its preprocessor_config.json (reference.system.family_configs)"),
    "qwen3-vl": (_QWEN3_VIDEO, "Qwen/Qwen3-VL-8B-Instruct video_preprocessor_config.json, third-party copies "
                 "(the same values in Qwen3.5/3.8 and MiniMax-H3 copies)"),
    "glm-4.1v": (_GLM4V_VIDEO, "zai-org/GLM-4.1V-9B-Thinking's video processor as vLLM prints it loaded (a user's "
                 "log on vLLM's tracker, third-party); the same numbers as Glm4vVideoProcessor's class defaults"),
    "gemma4": (_GEMMA4_VIDEO, "google/gemma-4's processor_config.json, its nested video_processor block (no "
               "video_preprocessor_config.json), third-party copies (Ollama's gemma4:26b / gemma4:31b blobs and "
               "ports' test fixtures quoting it); the same values as Gemma4VideoProcessor's class defaults"),
}  # fmt: skip
