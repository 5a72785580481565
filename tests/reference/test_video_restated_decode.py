"""The restated trained row's decode (`properties.video_trained.OraclePath`, what an engine's process compares C19
with) against TRAINED's real ``load_video`` on every clip kind (semantics §20.4): they refuse and take alike."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from deferlab.reference.oracle import video as oracle
from deferlab.reference.system.video import Refused, VideoRequest
from tests.reference.test_video_oracle import KIND_NAMES, real_code, trained
from tests.reference.video_child import run_in_a_child


@real_code
def test_restated_decode_in_a_child() -> None:
    """This file's test in a pytest process of its own, when this one cannot run the trained sides."""
    run_in_a_child(Path(__file__), partial(trained, "qwen3-vl"), "restated_decode and not in_a_child", CHILD_ENV)


CHILD_ENV = "DEFERLAB_RESTATED_DECODE_CHILD"


@real_code
@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl", "glm-4.1v", "gemma4"])
def test_restated_decode_refuses_what_the_trained_loader_refuses(family: str) -> None:
    """The ORACLE row's ``decode`` (what an engine's process compares with, no transformers there) refuses a clip
    exactly where TRAINED's real ``load_video`` refuses it and otherwise hands over the same frames: a container
    that states no frame count (the WebM kind) is refused by PyAV's sampler (semantics §20.4). Before stop 42 the
    restated row counted the WebM's frames and took them, so C19 read a WebM the checkpoint's loader refuses."""
    from deferlab.properties import clips, video_trained

    real = trained(family)["TRAINED"]
    restated = video_trained.OraclePath(family)
    for kind in KIND_NAMES:
        spec = clips.KINDS[kind]
        if not clips.codec_available(spec):
            continue
        data = clips.encode(spec)
        got = []
        for side in (real, restated):
            try:  # the real side refuses in its loader, or in its processor (its plan: a one-frame Qwen3-VL clip)
                d = side.decode(data, VideoRequest())
                side.plan(clips.clip_of(spec), VideoRequest())
                got.append(tuple(oracle.read_index(f) for f in d.frames) if kind != "rotation90" else d.indices)
            except Refused:
                got.append("refused")
        assert got[0] == got[1], (family, kind, got)
