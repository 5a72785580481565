"""What SGLang's video paths of their own module share (GLM-4.1V's `video_glm`, Gemma 4's `video_gemma4`): the
source loaded with the companions the path computes with, and how a failure of SGLang's own code becomes a
`Refused` in one line.

Why a base class: both paths run SGLang's own sampling and then the release's pinned transformers, so both need
that transformers (and torchvision, which its video processors require) loaded beside the tree, and both read a
failure of SGLang's code on a clip or of its decoder on a frame as a refusal, the first line of the exception said.
What a family's module holds is what differs: its sampling, its hand-over, its prompt text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.video import Refused

COMPANIONS = ("transformers", "torchvision")  # transformers' BaseVideoProcessor requires torchvision
FAILURES = (ValueError, AssertionError, ZeroDivisionError, TypeError, IndexError, RuntimeError)


def one_line(e: BaseException) -> str:
    """``Type: first line of the message``."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


class OwnVideoPath:
    """The parts of an SGLang video path of its own module (`reference.system.video.VideoPath`) that do not depend
    on the family: a subclass names its ``family`` and builds the rest of its state after ``__init__``."""

    label = "SGLANG"
    real_code = True
    family: ClassVar[str]

    def __init__(self, source: Any) -> None:
        src = common.source_of(source)
        missing = [c for c in COMPANIONS if c not in getattr(src, "companions", {})]
        if missing:
            raise SGLangSourceError(
                f"sglang source {src.spec!r} (version {src.version}) was loaded without the companions {missing} its "
                f"{self.family} video path computes with; accepted: sources.load(spec, companions={COMPANIONS})"
            )
        self.source, self.system = src, f"sglang-{src.version}"
        self.tf = src.companions["transformers"]

    @staticmethod
    def _bytes(data: Any) -> None:
        """``data`` must be the encoded video's bytes (checked before the release's own step, as `opened` does)."""
        if not isinstance(data, bytes | bytearray):
            raise InputTypeError(f"data must be the encoded video's bytes, got {type(data).__name__}")

    @staticmethod
    def _decoder_refused(exc: BaseException) -> Refused:
        """Its decoder failing on a frame (decord on a rotation tag): a refusal."""
        return Refused(f"SGLang's decoder refused a frame: {one_line(exc)}")
