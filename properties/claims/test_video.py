"""The video claims (semantics §20): what an engine makes of a video as a client sends it, against the trained side.

C16 (frames taken), C17 (geometry and tokens) and C18 (times) are pixel-free: every clip of the 6,000-clip grid
under every option set (`properties.video_claims.OPTION_SETS`) is swept once per engine path of the column's family,
each claim reading its own fields of the same sweep, whose smallest differing point is pinned; drawn clips follow.
C19 decodes the generated clips (`properties.clips`) with each side's own loader and compares the frames taken (read
back from their pixels) and their values. Verdicts are against TRAINED (the checkpoint's video processor, §20.1);
the model card's recipe (CARD) is swept beside it and reported in the evidence. Where the semantics restate the
engine's own rule (SGLang §20.5, vLLM §20.6, LMDeploy §20.7), every difference is read against it: one the rule does not give is worded as
unexplained, a failure signature of its own (`properties.video_claims.compare`), and C17 replays `RULE_PINNED`. A cell is ``n/a`` where the column
has no video path, or where an extra the trained side needs is missing (one line naming it).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import strategies as st

from deferlab.properties import claimcheck, impact, verdicts
from deferlab.properties import video_claims as vc
from deferlab.reference.oracle.video import ONE_ROW
from deferlab.reference.system import extras
from deferlab.reference.system.video import GRID_FPS, Clip, Unsupported, VideoRequest

NO_ENGINE = "deferlab's model takes decoded Kimi-K3 images only: it serves no video (semantics §20.2)"


def _paths(session: Any, policy: str) -> tuple[list[Any], str]:
    """The column's video paths and, when there are none, why (the ``n/a`` reason)."""
    if session.engine is None:
        return [], NO_ENGINE
    try:
        found = vc.video_paths(session, policy)
    except Unsupported as exc:
        return [], str(exc)
    if not found:
        return [], f"{session.engine}: no video path for this column (its plugin declares none for it, semantics §20)"
    return found, ""


@cache
def _rows(family: str) -> tuple[dict[str, Any], str]:
    """The trained rows of ``family`` (TRAINED, and CARD when the video extra is here), or why there are none."""
    missing = extras.why_missing("transformers")
    if missing is not None:
        return {}, f"the trained side {missing}"
    import importlib

    from deferlab.properties import bytes_trained, video_trained

    try:
        version = importlib.import_module("transformers").__version__
        if version == bytes_trained.TRANSFORMERS_VERSION and extras.why_missing("video") is None:
            rows = dict(video_trained.trained_paths(family))
        else:  # an engine's process runs the transformers its release pins (a companion): the restatement
            names = (vc.TRAINED,) if family in ONE_ROW else (vc.TRAINED, vc.CARD)  # GLM-4.1V: no card recipe
            rows = {row: _Restated(video_trained.oracle_path(family, row), version) for row in names}
    except Unsupported as exc:
        return {}, str(exc)
    return rows, ""


class _Restated:
    """A trained row in an engine's process: `reference.oracle.video`'s restatement of it, which equals the real
    row (transformers 5.24.0, qwen-vl-utils 0.0.14) on every point of the grid x option sets and on drawn clips
    (``tests/reference/test_video_oracle.py``, in a process of its own); its provenance says so."""

    def __init__(self, oracle: Any, version: str) -> None:
        self._oracle, self._version = oracle, version
        self.family, self.label, self.system, self.real_code = oracle.family, oracle.row, "deferlab", False

    def plan(self, clip: Clip, request: VideoRequest) -> Any:
        return self._oracle.plan(clip, request)

    def decode(self, data: bytes, request: VideoRequest) -> Any:
        return self._oracle.decode(data, request)

    def provenance(self) -> dict[str, str]:
        return {"plan": f"restated: this process runs transformers {self._version} (the engine's pin); "
                        f"reference.oracle.video's {self.label} row, equal to the real one on the whole grid"}  # fmt: skip


_SWEEPS: dict[tuple[str, str, str], vc.Sweep] = {}


def _sweep(path: Any, family: str, rows: dict[str, Any]) -> vc.Sweep:
    """One sweep per engine path and family, read by C16, C17 and C18 (the same plans, three readings)."""
    key = (getattr(path, "system", ""), family, getattr(path, "label", ""))
    if key not in _SWEEPS:
        _SWEEPS[key] = vc.sweep(path, rows)
    return _SWEEPS[key]


def _rows_provenance(rows: dict[str, Any]) -> dict[str, str]:
    """What ran behind each trained row (the real processor, or the restatement in an engine's process)."""
    return {f"{row}: {step}": what for row, side in rows.items() for step, what in sorted(side.provenance().items())}


# Frame sizes of the drawn clips (semantics §20.3): the grid's 64x48 first (what shrinking reaches), then the sizes
# clients send, where a per-frame or total pixel budget binds (a 64x48 frame never reaches ``max_pixels``: the
# stop-35 mutation campaign found SGLang's max_pixels arithmetic untested at that size alone).
FRAME_SIZES = ((64, 48), (640, 480), (1280, 720), (1920, 1080), (1080, 1920), (3840, 2160))


# Always replayed beside the grid's smallest difference: clips both long and large, where a total pixel budget
# shared over many frames binds (the grid is 64x48; drawing long and large together is rare). SGLang's
# `total_pixels / nframes` survived the stop-35 campaign until these were pinned (semantics §20.3).
LONG_AND_LARGE = (
    (Clip(900, 30.0, 1280, 720), VideoRequest()),
    (Clip(18_000, 30.0, 1920, 1080), VideoRequest()),
    (Clip(36_000, 60.0, 3840, 2160), VideoRequest()),
)


# Replayed for C17 where the semantics restate the engine's own rule (SGLang §20.5, vLLM §20.6, LMDeploy §20.7; `stated_rule`):
# a clip on which the served geometry already differs from TRAINED and the engine's own pixel budget binds, so a
# changed budget is a difference the rule does not explain (the stop-35 campaign's six survivors in
# `preprocess_video`). 270 s of 720p: 540 frames, so at the defaults the total budget's share (334,507 px a frame)
# is under the per-frame 602,112, and under a client's min_pixels of 548,800 the int(min_pixels x 1.05) floor
# (576,240) is over the share. Chosen so that each of the six mutants still fails there, now unexplained, in both
# Qwen families (a pin where a mutant's size meets TRAINED's would kill it only by a signature vanishing).
RULE_PINNED = {
    "C17": (
        (Clip(8100, 30.0, 1280, 720), VideoRequest()),
        (Clip(8100, 30.0, 1280, 720), VideoRequest(min_pixels=700 * 28 * 28)),
        # 162 s at 1120x630: 324 frames, whose total-budget share lands on a 28-step boundary, so SGLang's pre-resize
        # is 980x560 and a floored share (`//`) gives 980x532, a size the rule does not give (the stop-38 campaign's
        # `qwen_vl.py:277:25` survivor; found by searching §20.5's rule for such clips).
        (Clip(4860, 30.0, 1120, 630), VideoRequest()),
    ),
    # A rate asked above the clip's own: vLLM's Qwen3-VL loader reads every frame, so the processor samples again
    # at its own 2 fps (25 of 300 frames) and vLLM recomputes that count for the times (`qwen3_vl.py:1120`), a
    # line the option sets reach only where its count is the whole clip anyway (the stop-39 campaign's four
    # `1120:50` survivors; semantics §20.6 "C18's resample pin"). 300 / 24 = 12.5, so a floored quotient (24
    # frames) differs from int(300 / 24 x 2) = 25 (240 frames, the first pin, let `//` survive); and 300 frames is
    # past CPython's cached small ints (256), so the loader's `len(...) == total` flag made `is` is False there
    # (the stop-40 campaign's `video.py:193:57` survivor).
    "C18": ((Clip(300, 24.0), VideoRequest(fps=30.0)),),
}


# Replayed for C16-C18 on one family's columns, whatever its engines' rules: a fractional rate, which the option
# sets (whole rates 1 and 4) never ask. SGLang 0.5.23's GLM clamp converts a client's fps with `float`; a mutant
# that made it `int` survived the stop-41 sample (int(0.5) = 0, refused as not positive). 8 s at 30 fps: TRAINED
# and both GLM-4.1V engines take frames (0, 60, 120, 180), an even count the vLLM loader reads as chosen (semantics
# §20.5, §20.6, and the GLM mutation fragment's prediction for every family x engine).
# Gemma 4: a count asked equal to a short clip's length under an option label of its own (12 frames, `num_frames=12`),
# where TRAINED, SGLang and vLLM all take every frame and agree; SGLang's `_video_decoder_to_tensor` with its
# `total <= num_frames` made `==` or `is` survived the stop-42 campaign (it then asks 32 indices with repeats of a
# short clip, hidden elsewhere behind the option sets' own failures; semantics, Gemma 4's count pin).
FAMILY_PINNED = {
    # and the boundaries no grid clip sits on, where vLLM and TRAINED agree (semantics §20.6, "GLM-4.1V's boundary
    # pins"): exactly 300 s at a rate above 2 (the dynamic loader's `duration <= max_duration`), and exactly 600
    # frames past 300 s, read whole (the processor's `num_samples >= meta_frames`)
    "glm-4.1v": (
        (Clip(240, 30.0), VideoRequest(fps=0.5)),
        (Clip(9000, 30.0), VideoRequest()),
        (Clip(600, 1.0), VideoRequest()),
    ),
    # and a count of one, which vLLM's loader reads as one frame (`num_frames > 0`: a campaign survivor read it as
    # "every frame"), SGLang ignores (explained by its stated rule; semantics §20.10(b), "one-frame count pin"); and
    # a frame whose sides are no multiples of 16, where vLLM's soft-token count reads H / 16 and W / 16 unfloored
    # (the `/` made `//` survivors; §20.10(b), "vLLM's soft-token count"): every side agrees there; and a 70:1 frame,
    # where that count is 69 and the checkpoint's resize gives 70 (the tie the same section states)
    "gemma4": (
        (Clip(12, 30.0), VideoRequest(num_frames=12)),
        (Clip(12, 30.0), VideoRequest(num_frames=1)),
        (Clip(12, 30.0, 190, 142), VideoRequest(num_frames=12)),
        (Clip(12, 30.0, 17, 1190), VideoRequest(num_frames=12)),
    ),
}


def clips() -> st.SearchStrategy[tuple[Clip, VideoRequest]]:
    """Drawn clips: 1 to 20,000 frames at a grid rate, any rate from 0.5 to 240, or an unknown one (0), of a
    `FRAME_SIZES` size, under each option set; shrinks towards one frame, 64x48 and the defaults."""
    fps = st.one_of(st.sampled_from(GRID_FPS), st.floats(0.5, 240.0).map(lambda f: round(f, 3)), st.just(0.0))
    return st.builds(
        lambda n, f, size, r: (Clip(n, f, *size), r),
        st.integers(1, 20_000),
        fps,
        st.sampled_from(FRAME_SIZES),
        st.sampled_from(vc.OPTION_SETS),
    )


def _pixel_free(claim: str, session: Any, policy: str, family: str) -> None:
    paths, why = _paths(session, policy)
    rows, missing = _rows(family) if paths else ({}, "")
    ok = bool(paths) and bool(rows)
    why = why or missing
    pinned: list[tuple[Clip, VideoRequest]] = []
    evidence = ""
    figure = None
    if ok:
        sweeps = [_sweep(p, family, rows) for p in paths]
        pinned = [s.first(claim) for s in sweeps if s.first(claim) is not None] + list(LONG_AND_LARGE)
        # and the first difference the engine's stated rule does not explain, wherever on the grid it is
        pinned += [p for s in sweeps if (p := s.first_unexplained(claim)) is not None]
        if any(vc.stated_rule(p) is not None for p in paths):
            pinned += RULE_PINNED.get(claim, ())
        pinned += FAMILY_PINNED.get(family, ())
        evidence = "; ".join(s.evidence(claim, rows) for s in sweeps)
        # the strip shows the first clip both sides take, where there is one (a refusal draws no frame)
        shown = next((p for s in sweeps if (p := s.first_taken(claim)) is not None), None)
        figure = vc.strips(paths, rows, shown or (pinned[0] if pinned else None))
    trained = rows.get(vc.TRAINED)
    verdict = claimcheck.verify_claim(
        claim,
        policy,
        clips(),
        lambda case: vc.check(claim, paths, trained, *case),
        pinned=pinned,
        evidence=evidence,
        applicable=ok,
        not_applicable=why,
        provenance={**vc.provenance(paths), **_rows_provenance(rows)} if ok else {},
        partition=lambda case: case[1].label(),
        figure=figure,
    )
    if (
        verdict == "fails" and trained is not None and impact.wanted()
    ):  # what the failure does on realistic clips (semantics §21.7)
        verdicts.attach_impact(claim, policy, impact.guarded(lambda: impact.video_impact(claim, paths, trained)))
    claimcheck.assert_expected(claim, policy, verdict)


@pytest.mark.families("others")
@pytest.mark.claim("C16")
def test_claim_c16_video_sampling_equals_trained(served_session, served_paths, policy, model_family):
    """C16: the source frames taken equal the trained side's, on every clip of the grid and drawn clips."""
    _pixel_free("C16", served_session, policy, model_family)


@pytest.mark.families("others")
@pytest.mark.claim("C17")
def test_claim_c17_video_geometry_equals_trained(served_session, served_paths, policy, model_family):
    """C17: the per-frame size, temporal padding, ``video_grid_thw`` and video tokens equal the trained side's."""
    _pixel_free("C17", served_session, policy, model_family)


@pytest.mark.families("others")
@pytest.mark.claim("C18")
def test_claim_c18_video_times_equal_trained(served_session, served_paths, policy, model_family):
    """C18: the times of the temporal grid steps equal the trained side's within 1e-6 s."""
    _pixel_free("C18", served_session, policy, model_family)


@pytest.mark.families("others")
@pytest.mark.claim("C19")
def test_claim_c19_video_pixels_equal_trained(served_session, served_paths, policy, model_family):
    """C19: on every generated clip kind, the frames each side's own loader takes (read back from their pixels)
    agree, and their values are within one level."""
    paths, why = _paths(served_session, policy)
    rows, missing = _rows(model_family) if paths else ({}, "")
    video_missing = extras.why_missing("video")
    ok = bool(paths) and vc.TRAINED in rows and video_missing is None
    why = why or missing or (f"the clips {video_missing}" if video_missing else "")
    kinds: list[tuple[str, Any]] = []
    if ok:
        from deferlab.properties import clips as clip_kinds

        found = clip_kinds.KINDS
        kinds = list(found.items()) if isinstance(found, dict) else [(getattr(k, "name", str(k)), k) for k in found]
        # a column whose loader cannot decode here (a backend not installed) has no answer: n/a with its one line
        probe = [vc.decoded(p, clip_kinds.encode(kinds[0][1]), VideoRequest()) for p in paths]
        gone = [a.unsupported for a in probe if isinstance(a, vc.Answer) and a.unsupported is not None]
        if len(gone) == len(paths):
            ok, why, kinds = False, f"no loader of this column decodes here: {gone[0]}", []
    trained = rows.get(vc.TRAINED)

    def check(case: tuple[str, Any]) -> None:
        from deferlab.properties import clips as clip_kinds

        name, spec = case
        data = clip_kinds.encode(spec)
        want = vc.decoded(trained, data, VideoRequest())
        problems = [vc.pixels_problem(vc.decoded(p, data, VideoRequest()), want) for p in paths]
        problems = [p for p in problems if p]
        if problems:
            raise AssertionError(f"[{name}; defaults] " + "; ".join(problems))

    verdict = claimcheck.verify_claim(
        "C19",
        policy,
        st.sampled_from(kinds) if kinds else st.nothing(),
        check,
        pinned=kinds,
        max_examples=max(1, len(kinds)),
        evidence=f"{len(kinds)} generated clip kinds ({', '.join(n for n, _ in kinds)}), each side's own loader",
        applicable=ok,
        not_applicable=why,
        provenance={**vc.provenance(paths), **_rows_provenance(rows)} if ok else {},
        partition=lambda case: case[0],
    )
    claimcheck.assert_expected("C19", policy, verdict)
