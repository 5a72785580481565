"""vLLM's part of the video reproducers (`reports.repro.video`, semantics §20.6): where a script states the
request's options, which families each video claim's script reproduces, what its served side is called, and the
release's processing-info class per family (its own timestamps and size kwargs, which the scripts call).

Why data here: the reproducer code is engine-free; what differs per engine (vLLM samples in its loader, from
``media_io_kwargs['video']``, and takes the pixel options as processor kwargs) belongs to the engine's package.
Found by the reports through the registry: the module beside the plugin's ``video`` module, named ``repro_video``.
"""

from __future__ import annotations

from deferlab.impl.vllm import video_gemma4, video_glm
from deferlab.impl.vllm.video_checkpoint import FAMILIES as _CHECKPOINTS
from deferlab.reference.system.family_configs import published_config

# constant -> (the request's options it holds, None: every one; vLLM's name for those it names otherwise):
# media_io_kwargs['video'], where vLLM samples (semantics §20.6)
OPTIONS: dict[str, tuple[tuple[str, ...] | None, dict[str, str]]] = {
    "MEDIA_IO_KWARGS": (("fps", "num_frames"), {}),
}
_QWEN = ("qwen2.5-vl", "qwen3-vl")
# claim -> the families whose script the reproducers write for vLLM
# GLM-4.1V's too (semantics §20.6), and Gemma 4's (§20.10(b))
_OWN = (video_glm.FAMILY, video_gemma4.FAMILY)
FAMILIES: dict[str, tuple[str, ...]] = {cid: (*_QWEN, *_OWN) for cid in ("C16", "C17", "C18", "C19")}
SERVED = "vLLM's video loader"  # the served side, as a script's test names it
LOADER = "vLLM's media connector"  # the served side of C20
# family -> the constants its C17/C18 scripts state: INFO, (module, class) of the release's processing info, whose
# _complete_mm_processor_size_aliases, _get_vision_size and (Qwen3-VL) _get_video_second_idx the scripts call;
# GLM-4.1V's, whose _construct_video_placeholder its scripts call
CONSTANTS: dict[str, dict[str, object]] = {f: {"INFO": (v.info_module, v.info_class)} for f, v in _CHECKPOINTS.items()}
CONSTANTS[video_glm.FAMILY] = {"INFO": (video_glm.MODELS, video_glm.INFO)}
# Gemma 4's: its processing info (_compute_num_soft_tokens, get_video_repl) and the checkpoint's image processor
# config, the processor vLLM runs on a video's frames
CONSTANTS[video_gemma4.FAMILY] = {
    "INFO": (video_gemma4.MODELS, video_gemma4.INFO),
    "IMAGE_CONFIG": published_config(video_gemma4.FAMILY),
}
# none of vLLM's served times are the processor's timestamps of its frames: Qwen2.5-VL's are second_per_grid_ts of
# its metadata, Qwen3-VL's its own _get_video_second_idx (semantics §20.6)
PROCESSOR_TIMES: tuple[str, ...] = ()
