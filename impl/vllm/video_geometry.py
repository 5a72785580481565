"""What the Qwen video processor vLLM hands its frames to makes of them, two ways (semantics §20.6).

Why two: the processor (transformers' ``Qwen2VLVideoProcessor`` / ``Qwen3VLVideoProcessor``, the release's pinned
companion) decides the frames it keeps, the resize target and the grid, but its call also resizes, normalizes and
patchifies every pixel: on §20.3's grid (6,000 clips x 6 option sets, up to 768 frames each) that is minutes.

* `exact`: the processor's ``__call__`` on black frames of the clip's size, with vLLM's metadata and kwargs; the
  grid is read off its output. The reference, and what the tests hold `fast` to.
* `fast`: the same processor's own functions without pixels: its ``_standardize_kwargs`` and ``sample_frames`` (with
  every kwarg its ``preprocess`` fills from the instance), and its module's ``smart_resize`` with the arguments its
  ``resize`` passes (``factor`` = patch x merge, the ``size`` edges, Qwen3-VL's frame count and temporal factor);
  what is restated is the argument plumbing and the temporal padding of ``patchify`` (the frame count up to a
  multiple of ``temporal_patch_size``). Where the processor would cap pixels per frame or not resize, `fast` defers
  to `exact`.
"""

from __future__ import annotations

import copy
import math
import sys
from typing import Any

import numpy as np

# preprocess pops these before it hands the rest to sample_frames and _standardize_kwargs
_POPPED = ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata")


def exact(vp: Any, n: int, width: int, height: int, md: Any, call: dict[str, Any]) -> tuple:
    """(grid, the processor's indices into the frames handed or None, its metadata) from its real call."""
    frames = np.zeros((n, height, width, 3), np.uint8)
    out = vp(videos=[frames], video_metadata=[md], return_metadata=True, return_tensors="pt", **call)
    got = out["video_metadata"][0]
    sampling = call.get("do_sample_frames", vp.do_sample_frames)
    indices = tuple(int(i) for i in got.frames_indices) if sampling else None
    return tuple(int(v) for v in out["video_grid_thw"][0].tolist()), indices, got


def _filled(vp: Any, call: dict[str, Any]) -> dict[str, Any]:
    """The kwargs ``preprocess`` hands on: every valid kwarg, the call's or else the instance's."""
    kwargs = {k: call.get(k, getattr(vp, k, None)) for k in vp.valid_kwargs.__annotations__}
    return {k: v for k, v in kwargs.items() if k not in _POPPED}


def fast(vp: Any, n: int, width: int, height: int, md: Any, call: dict[str, Any]) -> tuple:
    """`exact`'s answer from the processor's own pixel-free functions (see the module docstring)."""
    kwargs = _filled(vp, call)
    sampling = call.get("do_sample_frames", vp.do_sample_frames)
    got, indices = md, None
    if sampling:
        got = copy.copy(md)
        picked = vp.sample_frames(metadata=got, **kwargs)
        indices = tuple(int(i) for i in picked)
        got.frames_indices = picked
        n = len(indices)
    std = vp._standardize_kwargs(**kwargs)
    size, patch, merge, tps = std["size"], std["patch_size"], std["merge_size"], std["temporal_patch_size"]
    one_edge = getattr(size, "shortest_edge", None) is None or getattr(size, "longest_edge", None) is None
    if std.get("cap_pixels_per_frame") or not std.get("do_resize", True) or one_edge:
        # a size with one edge (min_pixels or max_pixels alone) is the processor's call's to refuse, in its words
        return exact(vp, len(md.frames_indices), width, height, md, call)
    smart_resize = sys.modules[type(vp).__module__].smart_resize
    edges = {"factor": patch * merge, "min_pixels": size.shortest_edge, "max_pixels": size.longest_edge}
    if "num_frames" in smart_resize.__code__.co_varnames[: smart_resize.__code__.co_argcount]:
        h, w = smart_resize(num_frames=n, height=height, width=width, temporal_factor=tps, **edges)
    else:
        h, w = smart_resize(height, width, **edges)
    return (math.ceil(n / tps), h // patch, w // patch), indices, got
