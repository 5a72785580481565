"""Impact numbers a failing cell's test measures after its search (semantics §21.7).

Why in the claim run: a versions.json keeps a claim's evidence as sentences, and what they do not say (the share
of real uploads a defect hits, the largest difference in the tower's bf16, PSNR) cannot be read back later. The
test has the served side and TRAINED in hand, so it measures these once, with the claim's own comparison, under
the engine's defaults, on the realistic distribution of `reference.system.realistic`, and records a structured
``impact`` object beside the verdict (`properties.verdicts.attach_impact`). Severity is not set here (§21.3).
"""

from __future__ import annotations

import functools
import io
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deferlab.reference.system import realistic

IMPACT_ENV = "DEFERLAB_IMPACT"  # "0": no impact numbers (the side-by-side cost benchmark's other arm)


def wanted() -> bool:
    """Whether this run measures impact: not inside a mutation campaign's runs (``DEFERLAB_MUTATE_OUTCOMES`` set by
    `reports.mutate`), which read verdicts only and would only be slowed, nor where ``DEFERLAB_IMPACT=0`` (the
    benchmark that times a family's claims with and without the measurement, semantics §21.7)."""
    return os.environ.get("DEFERLAB_MUTATE_OUTCOMES") is None and os.environ.get(IMPACT_ENV, "1").strip() != "0"


def guarded(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``, or ``{"not_measured": why}`` when it raises: the verdict is recorded already, and a number
    that cannot be measured is said, never a reason to lose the claim's result."""
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - recorded in the impact, in one line
        return {"not_measured": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"}


LONG_SIDE = 24  # a realistic image is remade this small: the loaders part on mode, orientation, alpha (§21.7)
JPEG_CLASSES = frozenset(
    {"phone 12 MP", "phone 48 MP binned", "android 12.5 MP", "camera 24 MP", "panorama", "scanned A4 / Letter"}
)
TRANSPARENT_CLASSES = frozenset({"RGBA PNG with transparency", "icon"})  # screenshots' alpha is opaque
_BF16_MIN_NORMAL_EXP = -126


# -- pixels in the tower's dtype ------------------------------------------------------------------------------


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), returned as float32 (semantics §21.7)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def bf16_ulps(served: np.ndarray, trained: np.ndarray) -> np.ndarray:
    """|served - trained| in bf16 ulps of the trained value's binade (an exact zero: the smallest normal's)."""
    b = np.abs(trained.astype(np.float64))
    exp = np.where(b > 0, np.floor(np.log2(np.where(b > 0, b, 1.0))), _BF16_MIN_NORMAL_EXP)
    exp = np.maximum(exp, _BF16_MIN_NORMAL_EXP)
    return np.abs(served.astype(np.float64) - trained.astype(np.float64)) / np.exp2(exp - 7)


def psnr(served: np.ndarray, trained: np.ndarray) -> float:
    """PSNR in dB, peak 255, over every element (inf when equal)."""
    mse = float(np.mean((served.astype(np.float64) - trained.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def pixel_numbers(
    served: np.ndarray, trained: np.ndarray, mean: Sequence[float], std: Sequence[float]
) -> dict[str, Any]:
    """The §21.7 ``pixels`` of two uint8 (..., C) arrays of one shape: levels and PSNR, then both normalized with
    the family's checkpoint mean and std in float32 and rounded to bf16, what the tower gets."""
    if served.shape != trained.shape:
        raise ValueError(f"pixel_numbers: shapes {served.shape} and {trained.shape} differ (a size, not pixels)")
    s, t = served.astype(np.int32), trained.astype(np.int32)
    channels = s.shape[-1] if s.ndim == 3 else 1
    m = np.asarray(mean[:channels], np.float32)
    d = np.asarray(std[:channels], np.float32)

    def norm(x: np.ndarray) -> np.ndarray:
        y = x.astype(np.float32) / np.float32(255.0)
        return bf16((y.reshape(*y.shape[:2], channels) - m) / d)

    return _numbers(norm(s), norm(t), s, t)


def _numbers(a: np.ndarray, b: np.ndarray, s: np.ndarray, t: np.ndarray) -> dict[str, Any]:
    """The ``pixels`` entries of bf16 values ``a`` (served) and ``b`` (trained) and their levels ``s`` and ``t``."""
    return {
        "compared": int(a.size),
        "differ": int(np.count_nonzero(s != t)),
        "max_levels": int(np.abs(s - t).max(initial=0)),
        "psnr_db": round(psnr(s, t), 2) if np.any(s != t) else "inf",
        "bf16_differ": int(np.count_nonzero(a != b)),
        "max_bf16_ulps": round(float(bf16_ulps(a, b).max(initial=0.0)), 2),
    }


# -- the realistic distribution ---------------------------------------------------------------------------------


def share(affected: dict[str, list[int]]) -> dict[str, Any]:
    """``{affected, of, share, by_class}`` from class -> [affected, of]."""
    hit = sum(a for a, _ in affected.values())
    of = sum(n for _, n in affected.values())
    return {"affected": hit, "of": of, "share": round(hit / of, 4) if of else 0.0,
            "by_class": {k: list(v) for k, v in sorted(affected.items())}}  # fmt: skip


def _count(affected: dict[str, list[int]], kind: str, hit: bool) -> None:
    """One record of class ``kind`` into ``affected`` (class -> [affected, of]), as `share` reads it."""
    row = affected.setdefault(kind, [0, 0])
    row[0] += int(hit)
    row[1] += 1


def ratios(pairs: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Tokens served and trained over ``pairs``: the ratio's min, median and max, and both totals."""
    rs = [s / t for s, t in pairs if t]
    out: dict[str, Any] = {"served_total": sum(s for s, _ in pairs), "trained_total": sum(t for _, t in pairs)}
    if rs:
        out.update(
            ratio_min=round(min(rs), 4), ratio_median=round(statistics.median(rs), 4), ratio_max=round(max(rs), 4)
        )
    return out


_VIDEO_ANSWERS: dict[tuple[Any, ...], tuple[float, list[tuple[str, Any, list[Any]]]]] = {}


def _video_answers(paths: Sequence[Any], trained: Any, n: int) -> tuple[float, list[tuple[str, Any, list[Any]]]]:
    """Both sides' plans of the realistic clips under the defaults, once per paths and trained row (C16, C17 and
    C18 read the same plans, as they read one grid sweep), and the seconds they took."""
    from deferlab.properties import video_claims as vc
    from deferlab.reference.system.video import Clip, VideoRequest

    key = (tuple(id(p) for p in paths), id(trained), n)
    if key not in _VIDEO_ANSWERS:
        started, request, found = time.perf_counter(), VideoRequest(), []
        for record in realistic.videos(n):
            clip = Clip(record.frames, record.fps, record.width, record.height)
            found.append((record.kind, vc.answer(trained, clip, request), [vc.answer(p, clip, request) for p in paths]))
        _VIDEO_ANSWERS[key] = (time.perf_counter() - started, found)
    return _VIDEO_ANSWERS[key]


def video_impact(claim: str, paths: Sequence[Any], trained: Any, n: int = 200) -> dict[str, Any]:
    """C16/C17/C18: the realistic clips (semantics §21.5) each path plans otherwise than TRAINED, under the defaults,
    by the claim's own comparison (``both_take``: of them, those both sides take, the share a finding other than
    the one-sided refusal's states); C17 adds the tokens of the affected clips. ``seconds``: the plans' time, counted
    by the first claim that needed them (0 for the claims reading them after)."""
    from deferlab.properties import video_claims as vc

    started = time.perf_counter()
    fresh = (tuple(id(p) for p in paths), id(trained), n) not in _VIDEO_ANSWERS
    planned, answers = _video_answers(paths, trained, n)
    affected: dict[str, list[int]] = {}
    both: dict[str, list[int]] = {}  # differing where both sides take the clip: not a one-sided refusal
    tokens: list[tuple[int, int]] = []
    for kind, want, got in answers:
        if want.unsupported is not None or any(g.unsupported is not None for g in got):
            continue
        texts = [vc.compare(claim, g, want) for g in got]
        hit = any(t is not None for t in texts)
        _count(affected, kind, hit)
        _count(both, kind, any(t is not None and not t.startswith(vc.ONE_SIDED) for t in texts))
        if hit:
            if claim == "C17" and want.plan is not None:
                tokens += [(g.plan.tokens, want.plan.tokens) for g in got if g.plan is not None]
    out: dict[str, Any] = {"realistic": {**share(affected), "distribution": f"realistic.videos({n}, seed 0), defaults",
                                         "both_take": share(both)["affected"]}}  # fmt: skip
    if tokens:
        out["tokens"] = ratios(tokens)
    out["seconds"] = round(time.perf_counter() - started, 3)  # the plans' time included when this claim made them
    out["planned_seconds"] = round(planned, 3) if fresh else 0.0
    return out


def _small(record: realistic.ImageRecord) -> tuple[int, int]:
    w, h = record.width, record.height
    scale = LONG_SIDE / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


@functools.cache
def image(kind: str, mode: str, w: int, h: int) -> Any:
    """A realistic record's decoded image, small (§21.7): its mode, the class's alpha (transparent bands for the
    transparency classes, opaque otherwise), a gradient with noise (no symmetry); a palette image of a
    transparency class carries its transparency as Pillow's ``info`` does after decoding a ``tRNS`` chunk."""
    from PIL import Image

    from deferlab.properties.strategies import encoded

    rgb = encoded._rgb(w, h, 0)
    alpha = encoded._alpha(w, h, 0) if kind in TRANSPARENT_CLASSES else np.full((h, w), 255, np.uint8)
    made = {
        "RGB": lambda: Image.fromarray(rgb),
        "RGBA": lambda: Image.fromarray(np.dstack([rgb, alpha])),
        "L": lambda: Image.fromarray(rgb[..., 0]),
        "LA": lambda: Image.fromarray(np.stack([rgb[..., 0], alpha], -1)),
        "1": lambda: Image.fromarray(rgb[..., 0]).convert("1"),
        "P": lambda: Image.fromarray(rgb).quantize(16, dither=Image.Dither.NONE),
    }[mode]()
    if mode == "P" and kind in TRANSPARENT_CLASSES:
        made.info["transparency"] = PALETTE_ALPHA
    return made


PALETTE_ALPHA = bytes([0, 128] + [255] * 14)  # entry 0 transparent, entry 1 half: what a tRNS chunk says


@functools.cache
def image_bytes(kind: str, mode: str, orientation: int, w: int, h: int) -> bytes:
    """A realistic record's image, small: its mode, its EXIF orientation, sent as its class is (§21.7)."""
    from PIL import Image

    from deferlab.properties.strategies import encoded

    jpeg = kind in JPEG_CLASSES and mode in ("RGB", "L")
    options: dict[str, Any] = {"quality": 95} if jpeg else {}  # PNG writes a palette's transparency from its info
    if orientation != 1:
        exif = Image.Exif()
        exif[encoded.EXIF_ORIENTATION] = orientation
        options["exif"] = exif.tobytes()
    buf = io.BytesIO()
    image(kind, mode, w, h).save(buf, "JPEG" if jpeg else "PNG", **options)
    return buf.getvalue()


def bytes_impact(
    loaders: Sequence[Any], trained: Any, problem: Callable[[Any, Any, bytes, str], str | None], n: int = 2000
) -> dict[str, Any]:
    """C20: the realistic images (semantics §21.5) whose bytes a loader decodes otherwise than TRAINED; ``problem``
    is the claim's own comparison (`bytes_trained.decode_problem`). Each distinct small image is decoded once."""
    started = time.perf_counter()
    seen: dict[tuple[Any, ...], bool] = {}
    affected: dict[str, list[int]] = {}
    for record in realistic.images(n):
        w, h = _small(record)
        key = (record.kind in JPEG_CLASSES, record.kind in TRANSPARENT_CLASSES, record.mode, record.orientation, w, h)
        if key not in seen:
            data = image_bytes(record.kind, record.mode, record.orientation, w, h)
            seen[key] = any(problem(trained, loader, data, "file") is not None for loader in loaders)
        _count(affected, record.kind, seen[key])
    return {
        "realistic": {**share(affected), "distribution": f"realistic.images({n}, seed 0), each remade at long side "
                      f"{LONG_SIDE} px in its mode and orientation, sent as its class is; {len(seen)} distinct files"},
        "seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


PIXEL_SIZE = (16, 12)  # C14's remade image: its mode and alpha, not its size or aspect (§21.7)
_GRID_CHANGE = "!= checkpoint's"  # C14's wording for a grid or shape change (semantics §21.1's sequence)


def images_impact(
    problem: Callable[[Any], str | None], n: int = 2000, size: tuple[int, int] = PIXEL_SIZE
) -> dict[str, Any]:
    """C14: the realistic images (semantics §21.5), each remade decoded at ``size`` (the family's ``remade``, default
    `PIXEL_SIZE`) in its mode and its class's
    alpha (`image`), whose pixels the served side gives otherwise than TRAINED by the claim's own comparison
    ``problem(image)`` (None: the same). A grid change at the remade size is left out of ``of`` (it is the remade
    size's, not the upload's: C13's share at the real sizes says it), and is reported as ``grid_at_remade_size``. Each
    distinct image is served once."""
    started = time.perf_counter()
    seen: dict[tuple[Any, ...], str | None] = {}
    affected: dict[str, list[int]] = {}
    grid = 0
    for record in realistic.images(n):
        key = (record.kind in TRANSPARENT_CLASSES, record.mode)
        if key not in seen:
            seen[key] = problem(image(record.kind if key[0] else "", record.mode, *size))
        found = seen[key]
        changed = found is not None and _GRID_CHANGE in found
        if changed:  # not comparable at the remade size (left out of ``of``, as a one-sided refusal is)
            grid += 1
        else:
            _count(affected, record.kind, found is not None)
    return {
        "realistic": {**share(affected), "grid_at_remade_size": grid,
                      "distribution": f"realistic.images({n}, seed 0), each remade decoded at {size[0]}x"
                      f"{size[1]} in its mode and its class's alpha; {len(seen)} distinct"},
        "seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip


def geometry_impact(
    served: Sequence[Callable[[int, int], Any]], trained: Callable[[int, int], Any], n: int = 2000
) -> dict[str, Any]:
    """C13: the realistic images (semantics §21.5) at their displayed size whose geometry any served side gives
    otherwise than TRAINED (a refusal on one side counts; both refusing is agreement), with the tokens of the
    affected sizes. ``served`` and ``trained`` give a geometry with ``tokens`` or raise to refuse."""
    started = time.perf_counter()

    def answer(fn: Callable[[int, int], Any], w: int, h: int) -> Any:
        try:
            return fn(w, h)
        except Exception as exc:  # noqa: BLE001 - a refusal is an answer, compared below
            return ("refused", type(exc).__name__)

    seen: dict[tuple[int, int], tuple[bool, list[tuple[int, int]]]] = {}
    affected: dict[str, list[int]] = {}
    tokens: list[tuple[int, int]] = []
    for record in realistic.images(n):
        size = realistic.displayed(record)
        if size not in seen:
            want = answer(trained, *size)
            got = [answer(fn, *size) for fn in served]
            differ = any(g != want for g in got)  # a refusal is a tuple: unequal to any geometry
            pairs = [(int(g.tokens), int(want.tokens)) for g in got if not isinstance(g, tuple)
                     and not isinstance(want, tuple) and g != want]  # fmt: skip
            seen[size] = (differ, pairs)
        differ, pairs = seen[size]
        _count(affected, record.kind, differ)
        tokens += pairs  # non-empty only where a side differs
    out: dict[str, Any] = {
        "realistic": {**share(affected), "distribution": f"realistic.images({n}, seed 0) at their displayed sizes; "
                      f"{len(seen)} distinct sizes"},
    }  # fmt: skip
    if tokens:
        out["tokens"] = ratios(tokens)
    out["seconds"] = round(time.perf_counter() - started, 3)
    return out


def tower_numbers(
    served: np.ndarray, trained: np.ndarray, served_levels: np.ndarray, trained_levels: np.ndarray
) -> dict[str, Any]:
    """C14's ``pixels`` at one input (semantics §21.7): the two sides' normalized tensors as the tower gets them,
    rounded to bf16, and the uint8 levels each side's values stand for (recovered through its own table)."""
    a, b = bf16(served.astype(np.float32)), bf16(trained.astype(np.float32))
    return _numbers(a, b, served_levels.astype(np.int32), trained_levels.astype(np.int32))
