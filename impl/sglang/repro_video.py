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
_QWEN = ("qwen2.5-vl", "qwen3-vl")
# claim -> the families whose script the reproducers write for SGLang (its frames as deferlab runs them)
FAMILIES: dict[str, tuple[str, ...]] = {"C16": _QWEN, "C17": _QWEN, "C18": _QWEN, "C19": _QWEN}
SERVED = "SGLang's video path"  # the served side, as a script's test names it
LOADER = "SGLang's image loader"  # the served side of C20
# the families whose served times are the pinned processor's own timestamps of SGLang's frames (Qwen3-VL); the
# others' are SGLang's own rule (Qwen2.5-VL: no metadata handed over, the 24 fps fallback), semantics §20.5
PROCESSOR_TIMES: tuple[str, ...] = ("qwen3-vl",)
