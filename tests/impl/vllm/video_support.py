"""What vLLM's per-family video tests share (`test_video_glm`, `test_video_gemma4`): the path, its plans as JSON,
and the trained side's plans and decode from a child.

Why a child for the trained side: this process holds the vLLM release's pinned transformers, and the trained side
is the checkpoint's processor under transformers 5.24.0 (`properties.video_trained.trained_paths`), so its plans
and decoded frames come from a process of their own, recorded as the served side's are (a refusal: its type and
message).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.video import Clip, Unsupported, VideoPath, VideoRequest

_TRAINED = """
import json, sys
from deferlab.properties.video_trained import trained_paths
from deferlab.reference.system.video import Clip, VideoRequest
side = trained_paths(sys.argv[1])["TRAINED"]
out = []
for c, r in json.loads(sys.argv[2]):
    try:
        p = side.plan(Clip(*c), VideoRequest(**r))
        out.append({"indices": list(p.indices), "size": list(p.size), "grid": list(p.grid), "tokens": p.tokens,
                    "times": list(p.times), "padded": p.padded})
    except Exception as e:
        out.append({"refused": type(e).__name__, "why": str(e)})
print("JSON:" + json.dumps(out))
"""

_DECODE = """
import sys, numpy as np
from deferlab.properties import clips
from deferlab.properties.video_trained import trained_paths
from deferlab.reference.system.video import VideoRequest
try:
    got = trained_paths(sys.argv[1])["TRAINED"].decode(clips.encode(clips.KINDS[sys.argv[2]]), VideoRequest())
    np.save(sys.argv[3], np.asarray(got.frames))
except ValueError as e:
    print("REFUSED", e)
"""


def marks(facts: str) -> list[pytest.MarkDecorator]:
    """A family video test's marks: it runs on the releases whose ``facts`` (what the semantics section states) it
    checks, 0.33.0 and 0.34.0, with vLLM and transformers installed."""
    return [
        pytest.mark.skipif(
            os.environ.get("DEFERLAB_VLLM", "0.34.0") not in ("0.33.0", "0.34.0"),
            reason=f"the {facts} are 0.33.0's and 0.34.0's",
        ),
        pytest.mark.extra("vllm"),
        pytest.mark.extra("transformers"),
    ]


def video_path(source: Any, family: str) -> VideoPath:
    """vLLM ``source``'s one video path for ``family``."""
    from deferlab.impl.vllm.video import video_paths

    found = video_paths(source, family)
    assert len(found) == 1 and isinstance(found[0], VideoPath)
    return found[0]


def trained_plans(family: str, points: list[tuple[Clip, VideoRequest]]) -> list[dict[str, Any]]:
    """TRAINED's plans of ``points`` from a child process (transformers 5.24.0, the real processor)."""
    arg = json.dumps([[[c.frames, c.fps, c.width, c.height], r.given()] for c, r in points])
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_TRAINED), family, arg], capture_output=True,
                         text=True, timeout=600, check=True)  # fmt: skip
    return json.loads(next(x for x in run.stdout.splitlines() if x.startswith("JSON:"))[5:])


def served(path: VideoPath, clip: Clip, request: VideoRequest) -> dict[str, Any]:
    """The served path's plan as the trained side's child records one (a refusal: its type and message)."""
    try:
        p = path.plan(clip, request)
    except (Unsupported, ValueError) as e:
        return {"refused": type(e).__name__, "why": str(e)}
    return {"indices": list(p.indices), "size": list(p.size), "grid": list(p.grid), "tokens": p.tokens,
            "times": list(p.times), "padded": p.padded}  # fmt: skip


def trained_decode(family: str, kind: str, out: Path) -> str:
    """TRAINED's decode of the encoded ``kind`` in a child, its frames saved to ``out``; the child's output (a
    refusal by the processor is a line ``REFUSED <message>``, and no file)."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_DECODE), family, kind, str(out)], check=True,
                         timeout=600, capture_output=True, text=True)  # fmt: skip
    return run.stdout
