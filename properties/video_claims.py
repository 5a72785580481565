"""How the video claims (C16-C19) read an engine's video path against the trained side (semantics §20.2, §20.3).

Why one harness: C16 (sampling), C17 (geometry and tokens) and C18 (times) are three readings of one pixel-free
answer, `VideoPlan`, which each side gives for a `Clip` and a `VideoRequest`; the exhaustive grid (6,000 clips x
the option sets) is swept once per engine path and family, and each claim reads its fields off the same sweep.
C19 reads the frames each side's own loader decodes from encoded clips (`properties.clips`), whose pixels carry
their index (`reference.oracle.video.read_index`).

A side that does not take an option (`video.Unsupported`) has no answer for that point: the point is left out and
counted, never a failure. A refusal (any other exception) is compared: both refusing is agreement; one refusing is
a failure named so (semantics §20.2).

Every difference explained (semantics §20.5, §20.6, §20.7): where the semantics restate an engine's own rule
(`reference.oracle.video_served`), a served plan that differs from the trained side's is a failure worded as
before only when it equals that rule's plan in the claim's fields (and, for C17, in the engine's own pre-resize);
otherwise it is worded as unexplained, a distinct failure signature, so a second difference of the same shape
(a changed size on a clip already failing) no longer hides behind the first.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deferlab.reference.oracle.video_served import rule_for
from deferlab.reference.system.video import (
    OPTIONS_ENV,
    Clip,
    Unsupported,
    VideoPlan,
    VideoRequest,
    differing,
    grid_clips,
    user_requests,
)

# The option sets swept per clip (semantics §20.3): the defaults, the two ways a client asks for fewer or more
# frames (a rate and a count), and a per-frame pixel budget as the Qwen recipes take it.
BASE_OPTION_SETS: tuple[VideoRequest, ...] = (
    VideoRequest(),
    VideoRequest(fps=1.0),
    VideoRequest(fps=4.0),
    VideoRequest(num_frames=8),
    VideoRequest(num_frames=16),
    VideoRequest(min_pixels=64 * 28 * 28, max_pixels=256 * 28 * 28),
)
# and a user's own (``--video-fps`` / ``--video-frames`` of the commands, through `OPTIONS_ENV`)
OPTION_SETS = BASE_OPTION_SETS + tuple(
    r for r in user_requests(os.environ.get(OPTIONS_ENV)) if r not in BASE_OPTION_SETS
)
FIELDS = {"C16": ("indices",), "C17": ("size", "padded", "grid", "tokens"), "C18": ("times", "stamps")}
WHAT = {
    "C16": "frames taken differ from the trained side's",
    "C17": "geometry differs from the trained side's",
    "C18": "times differ from the trained side's",
}
UNEXPLAINED = ", not as {rule} states the engine's own rule"  # after a difference's head: a distinct signature
TIME_TOLERANCE = 1e-6  # seconds (semantics §20.2): the sides compute times in float64 from the same integers
TRAINED, CARD = "TRAINED", "CARD"


@dataclass(frozen=True)
class Answer:
    """One side's answer at one point: a plan, a refusal (``"ExcType: message"``) or no answer (`Unsupported`)."""

    plan: VideoPlan | None = None
    refused: str | None = None
    unsupported: str | None = None


def answer(path: Any, clip: Clip, request: VideoRequest) -> Answer:
    try:
        return Answer(plan=path.plan(clip, request))
    except Unsupported as exc:
        return Answer(unsupported=str(exc))
    except Exception as exc:  # noqa: BLE001 - a refusal of the side's own code is a result, compared below
        return Answer(refused=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def where(clip: Clip, request: VideoRequest) -> str:
    """The counterexample's prefix: ``[120@30 64x48; fps=1]``."""
    return f"[{clip.frames}@{clip.fps:g} {clip.width}x{clip.height}; {request.label()}]"


def field_difference(claim: str, served: VideoPlan, trained: VideoPlan) -> str | None:
    """What differs between two plans in the claim's fields (None: nothing)."""
    for name in FIELDS[claim]:
        a, b = getattr(served, name), getattr(trained, name)
        if name == "indices" and tuple(a) != tuple(b):
            return differing(a, b)
        if name == "times":
            if a is None or b is None:
                if (a is None) != (b is None):
                    return f"times {'not computed' if a is None else a[:4]} != {'not computed' if b is None else b[:4]}"
                continue
            if len(a) != len(b):
                return f"{len(a)} times != {len(b)}"
            gap = np.abs(np.asarray(a, float) - np.asarray(b, float))
            if gap.size and float(gap.max()) > TIME_TOLERANCE:
                i = int(gap.argmax())
                return f"grid step {i}: {a[i]:.6f} s != {b[i]:.6f} s"
            continue
        if name == "stamps":  # the text told, where both sides give it (semantics §20.2)
            if a is not None and b is not None and tuple(a) != tuple(b):
                if len(a) != len(b):
                    return f"{len(a)} stamps != {len(b)}"
                i = next(k for k, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
                return f"stamp {i}: {a[i]!r} != {b[i]!r}"
            continue
        if name != "indices" and a != b:
            return f"{name} {a} != {b}"
    return None


class StatedRule:
    """An engine's rule as the semantics state it, for one family, answering as a side does (`answer`)."""

    def __init__(self, family: str, section: str, rule: Callable[[str, Clip, VideoRequest], VideoPlan]) -> None:
        self.family, self.section, self._rule = family, section, rule
        self._last: tuple[tuple[Clip, VideoRequest], Answer] | None = None

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        return self._rule(self.family, clip, request)

    def said(self, clip: Clip, request: VideoRequest) -> Answer:
        """The rule's answer at a point, kept for the next call (a sweep asks once per claim and row)."""
        if self._last is None or self._last[0] != (clip, request):
            self._last = ((clip, request), answer(self, clip, request))
        return self._last[1]


def stated_rule(path: Any) -> StatedRule | None:
    """The stated rule of ``path``'s engine for its family (None: the semantics restate none for it)."""
    found = rule_for(getattr(path, "system", ""), getattr(path, "family", None))
    return None if found is None else StatedRule(getattr(path, "family", ""), *found)


def unexplained(claim: str, served: Answer, rule: StatedRule, clip: Clip, request: VideoRequest) -> str | None:
    """None when the served answer is ``rule``'s: both refuse, or the plans are equal in the claim's fields (C17:
    and in the engine's own pre-resize, when it reports one), so the difference from the trained side is the one
    the semantics state. Else what the rule gives instead."""
    said = rule.said(clip, request)
    if served.refused is not None:
        return None if said.refused is not None else "the rule takes it"
    if said.plan is None:
        return f"the rule {'refuses' if said.refused else 'has no answer'} ({said.refused or said.unsupported})"
    plan = served.plan
    assert plan is not None
    found = field_difference(claim, plan, said.plan)
    if found is None and claim == "C17" and plan.pre_size is not None and plan.pre_size != said.plan.pre_size:
        found = f"pre-resize {plan.pre_size} != {said.plan.pre_size}"
    return None if found is None else f"against the rule, {found}"


def compare(
    claim: str, served: Answer, trained: Answer, rule: StatedRule | None = None, point: tuple[Clip, VideoRequest] = ()
) -> str | None:
    """The failure text at one point (None: agreement, or no answer on either side). With the engine's stated
    ``rule`` and the ``point``, a difference the rule does not explain is worded so (`UNEXPLAINED`)."""
    if served.unsupported is not None or trained.unsupported is not None:
        return None
    if served.refused is not None and trained.refused is not None:
        return None
    found = None
    if served.plan is not None and trained.plan is not None:
        found = field_difference(claim, served.plan, trained.plan)
        if found is None:
            return None
    why = None if rule is None else unexplained(claim, served, rule, *point)
    odd, tail = ("", "") if why is None else (UNEXPLAINED.format(rule=rule.section), f"; {why}")
    if served.refused is not None:
        return f"the served side refused what the trained side takes{odd} ({served.refused}){tail}"
    if trained.refused is not None:
        return f"the served side took what the trained side refuses{odd} ({trained.refused}){tail}"
    return f"{WHAT[claim]}{odd}: {found}{tail}"


ONE_SIDED = (
    "the served side refused what the trained side takes",
    "the served side took what the trained side refuses",
)


@dataclass
class Sweep:
    """One engine path against the trained rows over the grid: per claim, the differing points (the first option set
    first, the defaults; then the fewest frames)."""

    points: int = 0
    seconds: float = 0.0
    differ: dict[str, dict[str, list[tuple[Clip, VideoRequest, str]]]] = field(default_factory=dict)
    unanswered: dict[str, int] = field(default_factory=dict)  # option label -> points a side did not answer
    rule: str = ""  # the section stating the engine's own rule, when the differences were read against one

    def first(self, claim: str, row: str = TRAINED) -> tuple[Clip, VideoRequest] | None:
        found = self.differ.get(row, {}).get(claim, [])
        return None if not found else found[0][:2]

    def first_taken(self, claim: str, row: str = TRAINED) -> tuple[Clip, VideoRequest] | None:
        """The first differing point where both sides take frames (no one-sided refusal): what a frame strip can
        show (a refused side draws no frame); None when every difference is a refusal."""
        found = self.differ.get(row, {}).get(claim, [])
        return next((p[:2] for p in found if not p[2].startswith(ONE_SIDED)), None)

    def first_unexplained(self, claim: str, row: str = TRAINED) -> tuple[Clip, VideoRequest] | None:
        """The first differing point the engine's stated rule does not explain (None: every one is the rule's):
        replayed beside the smallest difference, so an unexplained difference anywhere on the grid reaches the
        claim's failure signature, not only the sweep's evidence count."""
        found = self.differ.get(row, {}).get(claim, [])
        marker = UNEXPLAINED.format(rule=self.rule)
        return next((p[:2] for p in found if self.rule and marker in p[2]), None)

    def evidence(self, claim: str, rows: Iterable[str]) -> str:
        sets = ", ".join(r.label() for r in OPTION_SETS)
        parts = [
            f"{self.points:,} points (the grid's clips x {len(OPTION_SETS)} option sets: {sets}) in {self.seconds:.1f} s"
        ]
        for row in rows:
            found = self.differ.get(row, {}).get(claim, [])
            text = f"against {row}: {len(found):,} differ"
            if found and self.rule:
                odd = sum(1 for *_, what in found if UNEXPLAINED.format(rule=self.rule) in what)
                text += f" ({f'{odd:,} not' if odd else 'every one'} as {self.rule} states the engine's rule)"
            if found:
                clip, request, what = found[0]
                text += f" (smallest {where(clip, request)} {what})"
            parts.append(text)
        if self.unanswered:
            parts.append("not answered: " + ", ".join(f"{k} ({v:,})" for k, v in sorted(self.unanswered.items())))
        return "; ".join(parts)


def sweep(path: Any, rows: dict[str, Any], clips: Sequence[Clip] | None = None) -> Sweep:
    """Every clip of the grid under every option set, the path against each trained row (semantics §20.3)."""
    clips = grid_clips() if clips is None else clips
    order = sorted(range(len(clips)), key=lambda i: (clips[i].frames, clips[i].fps))
    rule = stated_rule(path)
    out = Sweep(differ={row: {c: [] for c in FIELDS} for row in rows}, rule=rule.section if rule else "")
    started = time.perf_counter()
    for request in OPTION_SETS:
        for i in order:
            clip = clips[i]
            served = answer(path, clip, request)
            out.points += 1
            if served.unsupported is not None:
                out.unanswered[request.label()] = out.unanswered.get(request.label(), 0) + 1
                continue
            for row, side in rows.items():
                trained = answer(side, clip, request)
                for claim in FIELDS:
                    what = compare(claim, served, trained, rule, (clip, request))
                    if what is not None:
                        out.differ[row][claim].append((clip, request, what))
    out.seconds = time.perf_counter() - started
    for row in out.differ.values():
        for found in row.values():
            # the engine's defaults first (what every user of them hits), then the shortest clip
            found.sort(key=lambda t: (OPTION_SETS.index(t[1]), t[0].frames, t[0].fps))
    return out


def check(claim: str, paths: Sequence[Any], trained: Any, clip: Clip, request: VideoRequest) -> None:
    """Raise one AssertionError naming every path that differs from the trained side at this point."""
    want = answer(trained, clip, request)
    found = []
    for path in paths:
        what = compare(claim, answer(path, clip, request), want, stated_rule(path), (clip, request))
        if what is not None:
            found.append(f"{where(clip, request)} {what}" + (f" ({name_of(path)})" if len(paths) > 1 else ""))
    if found:
        raise AssertionError("; ".join(found))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    return fn(), time.perf_counter() - started


PIXEL_ALLOWANCE = (
    1  # uint8 levels (semantics §20.2, as C14's (a)): two decoders' YUV-to-RGB roundings may differ by one
)


def decoded(path: Any, data: bytes, request: VideoRequest) -> Any:
    """A side's `DecodedVideo` of ``data``, or an `Answer` carrying its refusal or its want of a backend."""
    try:
        return path.decode(data, request)
    except Unsupported as exc:
        return Answer(unsupported=str(exc))
    except Exception as exc:  # noqa: BLE001 - the side's own loader refusing the clip is a result
        return Answer(refused=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def pixels_problem(served: Any, trained: Any) -> str | None:
    """C19 at one clip: the frames each side took (read back from their pixels) and, frame by frame, their values
    within `PIXEL_ALLOWANCE` levels (None: agreement, or no answer on either side)."""
    from deferlab.reference.oracle.video import read_index

    if isinstance(served, Answer) or isinstance(trained, Answer):
        return compare("C16", served if isinstance(served, Answer) else Answer(plan=VideoPlan(())),
                       trained if isinstance(trained, Answer) else Answer(plan=VideoPlan(())))  # fmt: skip
    what = "pixels differ from the trained side's"
    try:
        got = [read_index(f) for f in served.frames]
    except ValueError as exc:  # a frame whose code cannot be read: turned, cropped or other content (a result)
        return f"{what}: a served frame's index cannot be read back ({type(exc).__name__}: {exc})"
    try:
        want = [read_index(f) for f in trained.frames]
    except ValueError as exc:
        return f"{what}: a trained frame's index cannot be read back ({type(exc).__name__}: {exc})"
    if got != want:
        return f"{what}: frames taken (read back) {differing(got, want)}"
    for k, (a, b) in enumerate(zip(served.frames, trained.frames, strict=True)):
        if a.shape != b.shape:
            return (
                f"{what}: frame {k} (source {got[k]}) is {a.shape[1]}x{a.shape[0]}, trained {b.shape[1]}x{b.shape[0]}"
            )
        gap = np.abs(a.astype(np.int16) - b.astype(np.int16))
        off = int((gap > PIXEL_ALLOWANCE).sum())
        if off:
            return f"{what}: frame {k} (source {got[k]}): {off} of {gap.size} values more than {PIXEL_ALLOWANCE} level off (largest {int(gap.max())})"
    return None


def name_of(path: Any) -> str:
    """A video path's name in provenance and messages: its own ``name``, else ``system (family, video)``."""
    return getattr(path, "name", None) or f"{path.system} ({path.family}, video)"


def provenance(paths: Sequence[Any]) -> dict[str, str]:
    """What ran behind each video path, per step (recorded beside the verdict)."""
    return {f"{name_of(p)}: {step}": what for p in paths for step, what in sorted(p.provenance().items())}


DEMO = (Clip(120, 30.0), VideoRequest())  # a 4 s clip at 30 fps, the defaults: the strip when nothing differs
STRIP_FRAMES = 200  # a strip draws at most this many frames a side (longer answers are cut, and say so)


def strips(paths: Sequence[Any], rows: dict[str, Any], point: tuple[Clip, VideoRequest] | None) -> dict[str, Any]:
    """The data of the frame-strip figure (`reports.report.plots.video`): at ``point`` (the smallest differing
    one, else `DEMO`), which frames each side takes and the times it tells the model."""
    clip, request = point or DEMO
    sides = []
    for label, side in [*((name_of(p), p) for p in paths), *rows.items()]:
        got = answer(side, clip, request)
        plan = got.plan
        sides.append({
            "side": label,
            "indices": list(plan.indices[:STRIP_FRAMES]) if plan else None,
            "times": list(plan.times[:STRIP_FRAMES]) if plan and plan.times else None,
            "cut": bool(plan and len(plan.indices) > STRIP_FRAMES),
            "note": got.refused or got.unsupported or "",
        })  # fmt: skip
    return {"kind": "video-strips", "frames": clip.frames, "fps": clip.fps, "request": request.label(),
            "differs": point is not None, "sides": sides}  # fmt: skip


def video_companions(facts: Any, families_: Sequence[str]) -> tuple[str, ...]:
    """The companions an engine's video paths of ``families_`` compute with (its video module's ``COMPANIONS``)."""
    import importlib

    if not facts.video:
        return ()
    wanted = getattr(importlib.import_module(facts.video), "COMPANIONS", {})
    return tuple(sorted({c for f in families_ for c in wanted.get(f, ())}))


_VIDEO: dict[tuple[int, str], list[Any]] = {}


def video_paths(session: Any, policy: str) -> list[Any]:
    """The engine's video paths (`reference.system.video.VideoPath`) of the column ``policy``'s family and label,
    from its plugin's ``video`` module (semantics §20): none for deferlab's model (it takes decoded Kimi-K3
    images only), for an engine without a video module, or for a family it has no video path for. Raises
    `Unsupported` with the reason in the last case, so the claim records it as its ``n/a``."""
    import importlib

    from deferlab.reference.system.engines import engine
    from deferlab.reference.system.systems import split_label

    if session.engine is None or session.source is None:
        return []
    family, label, path = split_label(policy)
    key = (id(session), family)
    if key not in _VIDEO:
        module = engine(session.engine).video
        _VIDEO[key] = list(importlib.import_module(module).video_paths(session.source, family)) if module else []
    wanted = label if path is None else f"{label} {path}"
    return [p for p in _VIDEO[key] if getattr(p, "label", None) == wanted]
