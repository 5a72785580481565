"""What SGLang's per-family video tests share (`test_video_glm`, `test_video_gemma4`): one child per side.

Why one place: each family's test runs SGLang's video path on two releases and the trained side in children of
their own (a process holds one transformers), and every child records the same things the same way: its side's
plans on the family's clips and option sets (a refusal as its one-line ``Type: message``), and C19's decode of
encoded kinds, the frames read back from their pixels (saved beside, for a test that compares the pixels). A
family's test names its clips, options and kinds, and what else its served side records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.reference.system.video import Clip, VideoRequest
from tests.impl.sglang.support import run_child


def record(path: Any, clip: Clip, request: VideoRequest) -> dict[str, Any]:
    """A side's plan of ``clip`` under ``request`` as JSON, or its refusal (or `Unsupported`) as one line."""
    try:
        p = path.plan(clip, request)
    except Exception as exc:  # noqa: BLE001 - a refusal (or Unsupported) is a result the test reads
        return {"refused": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    return {"indices": list(p.indices), "size": list(p.size), "grid": list(p.grid), "tokens": p.tokens,
            "times": list(p.times), "padded": p.padded}  # fmt: skip


def decode_all(path: Any, out: Path, name: str, kinds: Iterable[str]) -> dict[str, Any]:
    """C19: each encoded kind through the side's own loader: the indices it says, the ones read back from the
    frames' pixels (the frames saved as ``out/name-kind.npy``), or its refusal as one line."""
    from deferlab.properties import clips as encoded
    from deferlab.reference.oracle.video import read_index

    found: dict[str, Any] = {}
    for kind in kinds:
        try:
            got = path.decode(encoded.encode(encoded.KINDS[kind]), VideoRequest())
        except Exception as exc:  # noqa: BLE001 - the side's own loader refusing is a result
            found[kind] = {"refused": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
            continue
        np.save(out / f"{name}-{kind}.npy", np.asarray(got.frames))
        found[kind] = {"said": list(got.indices or ()), "read": [read_index(f) for f in got.frames],
                       "fps": got.fps, "total": got.total}  # fmt: skip
    return found


def child(
    spec: str,
    out: str,
    family: str,
    cases: tuple[Sequence[Clip], Sequence[VideoRequest], Sequence[str]],
    served: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One side's record: ``spec`` "trained" is the trained side (`properties.video_trained.trained_paths`), else
    SGLang ``spec``'s video path for ``family`` (its label, provenance and whatever ``served`` adds); then every
    clip's plan under every option set, and C19's decode of the kinds (``cases``: clips, options, kinds)."""
    clips, options, kinds = cases
    if spec == "trained":
        from deferlab.properties.video_trained import trained_paths

        path = trained_paths(family)["TRAINED"]
        rec: dict[str, Any] = {"system": path.system}
    else:
        from deferlab.impl.sglang.sources import load
        from deferlab.impl.sglang.video import COMPANIONS, video_paths

        path = video_paths(load(spec, companions=COMPANIONS[family]), family)[0]
        rec = {"system": path.system, "label": path.label, "real_code": path.real_code, "prov": path.provenance()}
        rec.update(served(path) if served else {})
    rec["plans"] = [[record(path, c, r) for r in options] for c in clips]
    try:
        rec["decoded"] = decode_all(path, Path(out), spec, kinds)
    except ImportError as exc:  # the video extra (PyAV) is absent: C19 not run
        rec["decoded"] = {"unsupported": str(exc)}
    return rec


def run_sides(module: str, out: Path, specs: Iterable[str]) -> dict[str, Any]:
    """``module`` run as the child of each SGLang release in ``specs`` and of the trained side, into ``out``; a
    release whose wheel cannot be fetched skips the test (`support.run_child`)."""
    got = {s: run_child(module, s, str(out), spec=s, timeout=900, module=True) for s in specs}
    got["trained"] = run_child(module, "trained", str(out), timeout=900, module=True)
    return got
