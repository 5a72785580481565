"""SGLang's part of the video reproducers (`reports.repro.video`, semantics §20.5): where a script states the
request's options, which families each video claim's script reproduces, and what its served side is called.

Why data here: the reproducer code is engine-free; what differs per engine (SGLang reads its video options from the
server's ``--mm-process-config`` dict, and names the count ``nframes``) belongs to the engine's package. Found by
the reports through the registry: the module beside the plugin's ``video`` module, named ``repro_video``.
"""

from __future__ import annotations

# constant -> (the request's options it holds, None: every one; SGLang's name for those it names otherwise): the
# server's video dict (--mm-process-config '{"video": {...}}', semantics §20.5)
OPTIONS: dict[str, tuple[tuple[str, ...] | None, dict[str, str]]] = {
    "SERVER_VIDEO_CONFIG": (None, {"num_frames": "nframes"}),
}
# GLM-4.1V's options are a client's video_url fields, which SGLang's own request parsing keeps or drops
# (semantics §20.5): its script states them under the request's names
FAMILY_OPTIONS: dict[str, dict[str, tuple[tuple[str, ...] | None, dict[str, str]]]] = {
    "glm-4.1v": {"VIDEO_URL_FIELDS": (None, {})},
    # Gemma 4 (semantics §20.10(b)): the server's video dict reaches the checkpoint's processor under its own names
    "gemma4": {"SERVER_VIDEO_CONFIG": (("fps", "num_frames"), {})},
}
_QWEN = ("qwen2.5-vl", "qwen3-vl")
# claim -> the families whose script the reproducers write for SGLang (its frames as deferlab runs them); GLM-4.1V's
# from the releases that sample themselves (0.5.20 on: glm_sample_and_decode_sync; its scripts skip before)
# and Gemma 4's (its own _video_decoder_to_tensor, 0.5.17 on)
FAMILIES: dict[str, tuple[str, ...]] = {cid: (*_QWEN, "glm-4.1v", "gemma4") for cid in ("C16", "C17", "C18", "C19")}
SERVED = "SGLang's video path"  # the served side, as a script's test names it
LOADER = "SGLang's image loader"  # the served side of C20
# the families whose served times are the pinned processor's own timestamps of SGLang's frames (Qwen3-VL); the
# others' are SGLang's own rule (Qwen2.5-VL: no metadata handed over, the 24 fps fallback), semantics §20.5
PROCESSOR_TIMES: tuple[str, ...] = ("qwen3-vl",)
