"""SGLang's video reader, as both of deferlab's SGLang video paths drive it (semantics §20.5): a stand-in over a
`Clip`'s metadata for the pixel-free plans, and the release's own ``load_video`` on a client's bytes for C19.

Why a module of its own: the Qwen path (`impl.sglang.video`) and GLM-4.1V's (`impl.sglang.video_glm`) open the
same reader the same way; here neither imports the other.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from deferlab.impl.sglang.runtime import run_with_globals
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.video import Clip, Refused, Unsupported

DECODER = "sglang.srt.utils.video_decoder"


def reader_class(wrapper: type) -> type:
    """A `VideoDecoderWrapper` subclass (it passes ``preprocess_video``'s isinstance check) over a `Clip`."""

    class ClipReader(wrapper):  # type: ignore[misc, valid-type]
        """Reports the clip's frame count and average fps; serves stride-0 NHWC frames of its size; records the
        indices SGLang asked for. No decoder is opened."""

        def __init__(self, clip: Clip) -> None:
            self.clip = clip
            self.asked: list[int] | None = None

        def __len__(self) -> int:
            return self.clip.frames

        @property
        def avg_fps(self) -> float:
            return self.clip.fps

        def get_frames_as_tensor(self, indices: list) -> torch.Tensor:
            self.asked = [int(i) for i in indices]
            shape = (len(indices), self.clip.height, self.clip.width, 3)
            return torch.zeros((1, 1, 1, 1), dtype=torch.uint8).expand(*shape)

        def close(self) -> None:  # nothing to close: the wrapper's own close would clear a decoder never opened
            return None

    return ClipReader


@contextmanager
def opened(source: Any, data: bytes) -> Iterator[tuple[Any, str]]:
    """(reader, file name): SGLang's ``load_video`` on a file of ``data`` (a file, as a client names one: its
    data-URI branch decodes with pybase64, not installed here), its ``get_frames_as_tensor`` answering the CPU
    (``_is_cpu_engine`` True: no pin_memory on a machine without CUDA); closed after. `Unsupported` naming what to
    install when neither of its decoders is here; `Refused` when its loader refuses the bytes."""
    if not isinstance(data, bytes | bytearray):
        raise InputTypeError(f"data must be the encoded video's bytes, got {type(data).__name__}")
    if importlib.util.find_spec(source.module(DECODER)._BACKEND) is None:
        raise Unsupported(
            f"SGLang {source.version} decodes video with torchcodec, else decord ({DECODER}); neither is "
            "installed here: pip install decord (or a torchcodec built for this torch)"
        )
    utils = source.module("sglang.srt.utils.common")
    with tempfile.NamedTemporaryFile(suffix=".mp4", prefix="deferlab-sglang-") as file:
        file.write(bytes(data))
        file.flush()
        try:
            reader = utils.load_video(file.name, use_gpu=False)
        except Exception as exc:  # SGLang's loader (decord) refused the bytes
            raise Refused(f"SGLang's load_video refused the bytes: {type(exc).__name__}: {exc}") from exc
        reader.get_frames_as_tensor = run_with_globals(
            type(reader).get_frames_as_tensor, _is_cpu_engine=lambda: True
        ).__get__(reader)
        try:
            yield reader, file.name
        finally:
            reader.close()
