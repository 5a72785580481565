"""LMDeploy's part of the video reproducers (`reports.repro.video`, semantics §20.7): where a script states the
request's options, which families each video claim's script reproduces, and what its served side is called.

Why data here: the reproducer code is engine-free; what differs per engine belongs to the engine's package. LMDeploy
takes ``fps`` / ``num_frames`` from ``media_io_kwargs['video']`` and min/max pixels from ``mm_processor_kwargs``,
both under the request's own names, so its scripts read ``OPTIONS`` and need no constant of their own. Found by the
reports through the registry: the module beside the plugin's ``video`` module, named ``repro_video``.
"""

from __future__ import annotations

OPTIONS: dict[str, tuple[tuple[str, ...] | None, dict[str, str]]] = {}
# claim -> the families whose script the reproducers write for LMDeploy (Qwen3-VL: its only video family, §20.7)
FAMILIES: dict[str, tuple[str, ...]] = {"C16": ("qwen3-vl",), "C17": ("qwen3-vl",), "C18": ("qwen3-vl",),
                                        "C19": ("qwen3-vl",)}  # fmt: skip
SERVED = "LMDeploy's video loader"  # the served side, as a script's test names it
LOADER = "LMDeploy's image loader"  # the served side of C20
# the families whose served times are the pinned processor's own timestamps of LMDeploy's frames (semantics §20.7)
PROCESSOR_TIMES: tuple[str, ...] = ("qwen3-vl",)
