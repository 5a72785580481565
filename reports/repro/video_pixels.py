"""The reproducer of C19 (video pixels, semantics §20.2): which recorded row it fits, and the values it states (the
texts are `reports.repro.video_pixels_texts`).

Why this shape: C19's counterexample names a generated clip kind and its spec (``['constant', "ClipSpec(frames=120,
fps=30.0, ...)"]``, `properties.clips.KINDS`), so the script makes that clip itself with PyAV (every frame carrying
its index in its pixels), hands its bytes to the engine's own video loader and to transformers' ``load_video`` with
the checkpoint's processor's sampling, and compares the frames read back and their values within one level. The
engine's loader runs at its defaults, as the claim runs it (``VideoRequest()``). A row no template fits (another
counterexample, a family the engine's part does not list, a served path other than the default) gets no file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from fractions import Fraction
from types import ModuleType
from typing import Any

from deferlab.reports.repro import video_pixels_texts as texts
from deferlab.reports.repro.fitting import literal

_SPEC = re.compile(
    r"ClipSpec\(frames=(\d+), fps=([0-9.e+-]+), width=(\d+), height=(\d+), container='(mp4|webm)', "
    r"vfr=(True|False), rotation=(0|90|180|270)\)"
)
CLIP_VERSION = 2  # properties.clips.VERSION: part of a clip's key, so of a VFR clip's timestamp seed (a test pins it)


def parse_kind(ce: Any) -> tuple[str, dict[str, Any]] | None:
    """(kind name, the spec's fields) of a C19 counterexample ``[name, "ClipSpec(...)"]``; None for anything else."""
    got = literal(ce)
    if not (isinstance(got, list | tuple) and len(got) == 2 and isinstance(got[0], str)):
        return None
    m = _SPEC.fullmatch(str(got[1]).strip())
    if m is None or not re.fullmatch(r"[\w-]+", got[0]):
        return None
    fields = {"frames": int(m[1]), "fps": float(m[2]), "width": int(m[3]), "height": int(m[4]), "container": m[5],
              "vfr": m[6] == "True", "rotation": int(m[7])}  # fmt: skip
    if not (1 <= fields["frames"] <= 1 << 16 and fields["fps"] > 0 and min(fields["width"], fields["height"]) >= 16):
        return None
    return got[0], fields


def vfr_seed(fields: dict[str, Any]) -> int:
    """The seed of a VFR clip's jittered timestamps: the first 8 hex digits of its spec's key (`properties.clips
    .ClipSpec.key`: sha256 of the spec's fields and the clip version, as sorted JSON)."""
    text = json.dumps({**fields, "v": CLIP_VERSION}, sort_keys=True)
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


_ALSO = re.compile(r"""\[['"]([\w-]+)['"], ['"](ClipSpec\([^)]*\))['"]\]""")


def kinds_of(ce: Any, row: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The clip kinds a row names, the counterexample's first, then each other failing kind its evidence names
    (``also ['rotation90', "ClipSpec(...)"]``), as the script's ``KINDS``: each spec's fields, its rate as a
    fraction and its VFR seed."""
    found = [parse_kind(ce)]
    found += [parse_kind([m[1], m[2]]) for m in _ALSO.finditer(str((row or {}).get("evidence", "")))]
    out: dict[str, dict[str, Any]] = {}
    for name, fields in filter(None, found):
        rate = Fraction(fields["fps"]).limit_denominator(1001)
        seed = {"vfr_seed": vfr_seed(fields)} if fields["vfr"] else {}  # the jitter's seed, where there is jitter
        out.setdefault(name, {**fields, "rate": (rate.numerator, rate.denominator), **seed})
    return out


def fit(c: Any, part: ModuleType | None, ce: Any, row: Mapping[str, Any] | None = None) -> tuple[str, str, str] | None:
    """(imports, the clip kinds' constants, body) of C19's reproducer for the row's column, or None (see the module
    docstring); `reports.repro.video` adds the request's and the processor's constants."""
    if parse_kind(ce) is None or part is None or c.family not in part.FAMILIES.get("C19", ()) or c.path is not None:
        return None
    if c.engine not in texts.SERVED:
        return None
    kinds = kinds_of(ce, row)
    consts = "# The clip kinds deferlab's counterexample and evidence name (properties.clips), made below with\n"
    consts += "# PyAV: frames, fps, size, container, rate as a fraction, VFR and its seed, rotation (semantics §20.3)\n"
    consts += "KINDS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in kinds.items()) + "}\n"
    imports, served = texts.SERVED[c.engine]
    return "\n" + texts.CLIP_IMPORTS.lstrip("\n") + imports, consts, texts.COMMON + served + texts.C19_TEST
