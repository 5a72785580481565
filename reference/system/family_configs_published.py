"""The published values behind the model families' configs (semantics §18.1, §18.5): transformers' class defaults
of the image processors the configs name, and each family's published ``preprocessor_config.json`` (or InternVL's
``config.json``) with its source.

Why a module of its own: these are facts copied from files deferlab does not ship, one table each, read by the
config types (`reference.system.family_configs`, which re-exports every name here) and handed to transformers by
the tests; keeping them apart keeps the readers short.
"""

from __future__ import annotations

from typing import Any

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)
RESCALE = 1 / 255  # transformers' default rescale_factor, 0.00392156862745098 as the configs write it
# Pillow's filter numbers (PIL.Image.Resampling), as a config's ``resample`` writes them.
RESAMPLE = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}
BICUBIC = 3

# Class defaults of the transformers 5.24.0 image processors the families' configs name (the class
# attributes of each ``*ImageProcessorPil``; the torchvision class shares them). Keyed by the base name: a
# config's ``Fast``/``Pil`` suffix names the same class (image_processing_auto maps both).
_CLIP_NORM = {"image_mean": CLIP_MEAN, "image_std": CLIP_STD, "rescale_factor": RESCALE}
_ON = {"do_rescale": True, "do_normalize": True}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "Qwen2VLImageProcessor": {
        **_CLIP_NORM,
        **_ON,
        "do_convert_rgb": True,
        "resample": BICUBIC,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "min_pixels": 56 * 56,
        "max_pixels": 28 * 28 * 1280,
    },
    "Glm4vImageProcessor": {**_CLIP_NORM, **_ON},
    "PixtralImageProcessor": {**_CLIP_NORM, **_ON},
    "Gemma3ImageProcessor": {"image_mean": HALF, "image_std": HALF, "rescale_factor": RESCALE, **_ON},
    "Gemma4ImageProcessor": {
        "image_mean": (0.0,) * 3,
        "image_std": (1.0,) * 3,
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": False,
    },
    "GotOcr2ImageProcessor": {**_CLIP_NORM, **_ON, "resample": BICUBIC, "min_patches": 1, "max_patches": 12},
    "PaddleOCRVLImageProcessor": {
        **_CLIP_NORM,
        **_ON,
        "do_convert_rgb": True,
        "resample": BICUBIC,
        "patch_size": 14,
        "temporal_patch_size": 1,
        "merge_size": 2,
        "min_pixels": 384 * 384,
        "max_pixels": 1536 * 1536,
    },
}
# The same for a checkpoint whose preprocessing is its own remote code, keyed by the class its config names (its
# architecture): Nano Nemotron VL divides by 255 and normalizes with config.json's norm_mean / norm_std (read as
# image_mean / image_std: family_configs_read.ALIASES; semantics §18.9).
REMOTE_DEFAULTS: dict[str, dict[str, Any]] = {"NemotronH_Nano_VL_V2": {"rescale_factor": RESCALE, **_ON}}
QWEN_CLASSES = ("Qwen2VLImageProcessor", "Qwen2_5_VLImageProcessor")
PADDLEOCR_CLASSES = ("PaddleOCRVLImageProcessor",)
INTERNVL_ARCHITECTURES = ("InternVLChatModel",)
# What the InternVL 2.5/3 checkpoints' config.json set (semantics §18.5): an engine path reads a config dict with a
# key left out as these checkpoints have it (the remote InternVLChatConfig's own defaults differ; no deployment
# relies on them).
INTERNVL_CHECKPOINT_DEFAULTS: dict[str, Any] = {
    "force_image_size": 448,
    "image_size": 448,
    "patch_size": 14,
    "downsample_ratio": 0.5,
    "min_dynamic_patch": 1,
    "max_dynamic_patch": 12,
    "dynamic_image_size": True,
    "use_thumbnail": True,
}


# name -> the published dict (third-party copies where said; semantics §18.5 gives the sources in full)
PUBLISHED: dict[str, dict[str, Any]] = {
    "qwen2.5-vl": {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
    },
    "qwen3-vl": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    "internvl": {
        "architectures": ["InternVLChatModel"],
        "force_image_size": 448,
        "dynamic_image_size": True,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 12,
    },
    "glm-4.1v": {
        "size": {"shortest_edge": 12544, "longest_edge": 9633792},
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
    "mistral3": {
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": 0.00392156862745098,
        "patch_size": 14,
        "size": {"longest_edge": 1540},
        "resample": 3,
        "image_processor_type": "PixtralImageProcessorFast",
        "processor_class": "PixtralProcessor",
    },
    "gemma3": {
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 896, "width": 896},
        "resample": 2,
        "image_seq_length": 256,
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
    },
    "gemma4": {
        "do_normalize": False,
        "do_rescale": True,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
        "rescale_factor": 0.00392156862745098,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "max_soft_tokens": 280,
        "resample": 3,
        "image_processor_type": "Gemma4ImageProcessor",
        "processor_class": "Gemma4Processor",
    },
    # PaddleOCR-VL (semantics §18.9); its auto_map (the checkpoint's remote code) left out: transformers' own class
    # serves it without --trust-remote-code
    "paddleocr-vl": {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "image_processor_type": "PaddleOCRVLImageProcessor",
        "max_pixels": 2822400,
        "merge_size": 2,
        "min_pixels": 147384,
        "patch_size": 14,
        "processor_class": "PaddleOCRVLProcessor",
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 1,
    },
    # The Nemotron families vLLM device-normalizes (semantics §18.9): what each checkpoint's own preprocessing
    # divides by 255 and normalizes with.
    "nemotron-vl": {
        "architectures": ["LlamaNemotronVLModel"],
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": True,
    },
    "nemotron-parse": {
        "image_processor_type": "NemotronParseImageProcessor",
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": 0.00392156862745098,
        "do_rescale": True,
        "do_normalize": True,
    },
    "nano-nemotron-vl": {
        "architectures": ["NemotronH_Nano_VL_V2"],
        "force_image_size": 512,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "use_thumbnail": True,
        "norm_mean": list(CLIP_MEAN),
        "norm_std": list(CLIP_STD),
    },
    # MiniCPM-V 4.6 (semantics §18.9): transformers 5.24.0's class defaults, the values SGLang hard-codes too
    "minicpm-v-4.6": {
        "image_processor_type": "MiniCPMV4_6ImageProcessor",
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": True,
    },
    # ERNIE-4.5-VL (semantics §18.9): transformers 5.24.0's class defaults; SGLang reads the checkpoint's
    "ernie-4.5-vl": {
        "image_processor_type": "Ernie4_5_VLMoeImageProcessor",
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": True,
    },
    # MiMo-V2.5 (semantics §18.9): the statistics SGLang 0.5.22's fix states for the checkpoint
    "mimo-v2.5": {
        "architectures": ["MiMoV2ForCausalLM"],
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": True,
    },
    # Step3-VL (semantics §18.9): the remote code's ToTensor (u / 255) then Normalize(CLIP), as both engines copy it
    "step3-vl": {
        "architectures": ["Step3VLForConditionalGeneration"],
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": True,
    },
}

_THIRD = "third-party copy of the official file"
SOURCES: dict[str, str] = {
    "qwen2.5-vl": f"Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json, {_THIRD} "
    "(unsloth/Qwen2.5-VL-7B-Instruct-bnb-4bit; the same values in 32B and 72B copies)",
    "qwen3-vl": f"Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json, {_THIRD} "
    "(cdreetz/Qwen3-VL-8B-Instruct; the same values in Qwen3-VL-4B and Qwen3.5 copies)",
    "internvl": "OpenGVLab/InternVL3_5-8B config.json (refs/pr/12) and an InternVL2_5-8B copy for the tiling keys; "
    "use_thumbnail and the ImageNet mean/std from the model card's load_image (use_thumbnail=True), "
    "the config's own use_thumbnail unverified",
    "glm-4.1v": f"a GLM-4.1V-based checkpoint's preprocessor_config.json, {_THIRD} (hsb47gx6/AutoGLM-Phone-9B); "
    "GLM-4.1V-9B-Thinking's own image config unverified (its video config has the same mean/std)",
    "mistral3": f"mistralai/Mistral-Small-3.1-24B-Base-2503 preprocessor_config.json, {_THIRD} "
    "(MtTinker/Mistral-Small-3.1-24B-Base-2503)",
    "gemma3": f"google/gemma-3-4b-it preprocessor_config.json, {_THIRD} (Synthetica-AI/gemma-3-4b-it)",
    "gemma4": f"a Gemma 4 processor_config.json, {_THIRD} (win10/K1-31B; rnagabh/gemma4-vision-encoder agrees)",
    "paddleocr-vl": f"PaddlePaddle/PaddleOCR-VL preprocessor_config.json, {_THIRD} (quoted whole in a third-party "
    "write-up of the model, auto_map included; min_pixels / max_pixels and the 0.5 statistics agree with other "
    "copies' image_processor_config defaults)",
    "nemotron-vl": "no file states them: nvidia/llama-nemotron-embed-vl-1b-v2's remote-code SigLIP transform "
    "(ToTensor, then Normalize(0.5, 0.5)) as vLLM 0.34.0's adaptation states it "
    "(vllm/transformers_utils/processors/nemotron_vl.py SIGLIP_MEAN / SIGLIP_STD, build_siglip_transform); "
    "the checkpoint's own code unverified",
    "nemotron-parse": "nvidia/NVIDIA-Nemotron-Parse-v1.1's processor at revision fd1e3c6, which normalizes in the "
    "processor (NVIDIA-NeMo/Automodel PR #3331); its rescale 1/255 and CLIP mean/std as a third-party converter "
    "validates that processor's config; the file itself unverified (earlier revisions left normalization to "
    "RADIO's input conditioner and ship no mean/std)",
    "minicpm-v-4.6": "no checkpoint file read: transformers 5.24.0's MiniCPMV4_6ImageProcessorPil class defaults "
    "(IMAGENET_STANDARD_MEAN / STD 0.5, rescale 1/255), the values SGLang 0.5.17-0.5.23's own "
    "MiniCPMV4_6ImageProcessor also hard-codes; openbmb/MiniCPM-V-4.6's own preprocessor_config.json unverified",
    "ernie-4.5-vl": "no checkpoint file read: transformers 5.24.0's Ernie4_5_VLMoeImageProcessorPil class defaults "
    "(OPENAI_CLIP_MEAN / STD, rescale 1/255); the -PT checkpoints' own preprocessor_config.json (their remote-code "
    "image processor's) unverified",
    "mimo-v2.5": "no checkpoint file read: SGLang 0.5.22's mimo_v2.py comment on its CLIP constants (the "
    "checkpoint's preprocessor_config.json has CLIP image_mean / image_std with do_rescale 1/255, "
    "Qwen2VLImageProcessor's); XiaomiMiMo/MiMo-V2.5's own file unverified",
    "step3-vl": "no checkpoint file read: stepfun-ai/step3's remote-code Step3VisionProcessor (ToTensor, then "
    "Normalize with the CLIP constants written in it) as SGLang's processors/step3_vl.py (0.5.17-0.5.23) and vLLM "
    "0.34.0's transformers_utils/processors/step3_vl.py both copy it; processing_step3.py itself unverified",
    "nano-nemotron-vl": "nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16 config.json norm_mean / norm_std, a third-party "
    "fixture modelled on it (a NemotronH_Nano_VL_V2 converter test; the Nemotron Nano Omni "
    "preprocessor_config.json in mlx-vlm's tests agrees); the checkpoint's own file unverified",
}
