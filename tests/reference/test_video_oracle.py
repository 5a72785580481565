"""deferlab's video oracle (`reference.oracle.video`) against the trained sides run for real (semantics §20.4), and
the generated clips and their index code (§20.3).

The trained sides need torchvision through the loader's companion before transformers is first imported: where this
process imported it first (the whole suite), `test_trained_sides_in_a_child` runs them in a process of their own.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deferlab.reference.oracle import video as oracle
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoPlan, VideoRequest, differing, grid_clips
from tests.reference.video_child import run_in_a_child

FAMILIES = ("qwen2.5-vl", "qwen3-vl")
ROWS = ("TRAINED", "CARD")
CHILD_ENV = "DEFERLAB_VIDEO_ORACLE_CHILD"
CHILD_TESTS = "(trained or card or grid) and not in_a_child"


def real_code(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that runs the trained sides: both their extras (skips naming the one missing)."""
    return pytest.mark.extra("video")(pytest.mark.extra("transformers")(test))


def options(family: str) -> tuple[VideoRequest, ...]:
    """The option sets swept per family (semantics §20.3): defaults, fps 1 and 4, 8 and 16 frames, a pixel pair."""
    f = oracle.FAMILIES[family].factor
    return (VideoRequest(), VideoRequest(fps=1.0), VideoRequest(fps=4.0), VideoRequest(num_frames=8),
            VideoRequest(num_frames=16), VideoRequest(min_pixels=64 * f * f, max_pixels=256 * f * f))  # fmt: skip


def outcome(fn: Callable[[Clip, VideoRequest], VideoPlan], clip: Clip, request: VideoRequest) -> Any:
    """A plan, or ``"refused"`` / ``"unsupported"``: a refusal on both sides is agreement (semantics §20.2)."""
    try:
        return fn(clip, request)
    except Refused:
        return "refused"
    except Unsupported:
        return "unsupported"


def difference(a: Any, b: Any) -> str | None:
    """None when the oracle's outcome ``a`` equals the real ``b`` exactly (times within 1e-6 s, stamps as text);
    else the first difference, in the words of a counterexample."""
    if isinstance(a, str) or isinstance(b, str):
        return None if a == b else f"{a if isinstance(a, str) else 'a plan'} != {b if isinstance(b, str) else 'a plan'}"
    if a.indices != b.indices:
        return f"indices: {differing(a.indices, b.indices)}"
    for name in ("size", "grid", "tokens", "padded"):
        if getattr(a, name) != getattr(b, name):
            return f"{name}: {getattr(a, name)} != {getattr(b, name)}"
    ta, tb = a.times or (), b.times or ()
    if len(ta) != len(tb) or (ta and float(np.abs(np.subtract(ta, tb)).max()) > 1e-6):
        return f"times: {differing([round(x, 6) for x in ta], [round(y, 6) for y in tb])}"
    if a.stamps != b.stamps:  # the text told before each frame, exactly (Gemma 4's "MM:SS ")
        return f"stamps: {(a.stamps or ())[:3]} != {(b.stamps or ())[:3]}"
    return None


def label(clip: Clip, request: VideoRequest) -> str:
    return f"{clip.frames}@{clip.fps:g} {clip.width}x{clip.height}, {request.label()}"


# --- the trained sides, here or in a child ----------------------------------------------------------------------------
_PATHS: dict[str, Any] = {}


def trained(family: str) -> dict[str, Any]:
    """The family's TRAINED and CARD paths in this process, or a skip naming the child that runs them."""
    pytest.importorskip("av")
    from deferlab.reference.system.extras import why_missing

    for extra in ("video", "transformers"):
        if (why := why_missing(extra)) is not None:
            pytest.skip(why)
    if family not in _PATHS:
        from deferlab.properties import video_trained

        try:
            _PATHS[family] = video_trained.trained_paths(family)
        except Unsupported as e:
            _PATHS[family] = str(e)
    got = _PATHS[family]
    if isinstance(got, str):
        # this process imported another transformers, or an engine's companion put its own first on the path
        if "in this process" in got or "before the companion" in got or "the installed transformers is" in got:
            pytest.skip(f"the trained sides run in a child here (test_trained_sides_in_a_child): {got}")
        pytest.skip(got)
    return got


@real_code
def test_trained_sides_in_a_child() -> None:
    """This file's trained-side tests in a pytest process of its own, when this one cannot run them."""
    run_in_a_child(Path(__file__), partial(trained, "qwen3-vl"), CHILD_TESTS, CHILD_ENV)


# --- the grid ---------------------------------------------------------------------------------------------------------
@real_code
@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_equals_trained_and_card_on_the_grid(family: str) -> None:
    """Every clip of the 6,000-clip grid x every option set x both rows: the oracle's plan equals the real one
    exactly, and its vectorized `counts` the frames taken (semantics §20.3, §20.4). The wall time is printed
    (target: 60 s per family, all sides)."""
    paths = trained(family)
    clips, found, counts = grid_clips(), [], {"refused": 0, "plans": 0}
    frames, rates = np.array([c.frames for c in clips]), np.array([c.fps for c in clips])
    start = time.perf_counter()
    for row in ROWS:
        real = paths[row].plan
        mine = oracle.trained_plan if row == "TRAINED" else oracle.card_plan
        for request in options(family):
            taken = oracle.counts(family, row, frames, rates, request)  # the vectorized count, -1: refused
            for clip, k in zip(clips, taken.tolist(), strict=True):
                a = outcome(partial(mine, family), clip, request)
                b = outcome(real, clip, request)
                counts["refused" if isinstance(b, str) else "plans"] += 1
                if (d := difference(a, b)) is not None:
                    found.append(f"{row} {label(clip, request)}: {d}")
                if k != (-1 if isinstance(b, str) else len(b.indices) - b.padded):
                    found.append(f"{row} {label(clip, request)}: counts() {k}")
    wall = time.perf_counter() - start
    print(f"\n{family}: {2 * len(clips) * len(options(family))} plans per side in {wall:.1f} s, {counts}")
    assert not found, f"{len(found)} differ; first: " + "; ".join(found[:5])
    assert counts["plans"] > counts["refused"] > 0


# --- drawn clips ------------------------------------------------------------------------------------------------------
_FPS = st.one_of(st.just(0.0), st.floats(0.5, 240.0, allow_nan=False))


def _request(family: str) -> st.SearchStrategy[VideoRequest]:
    f = oracle.FAMILIES[family].factor

    def px(low: int, high: int) -> st.SearchStrategy[int]:
        return st.integers(low, high).map(lambda k: k * f * f)

    return st.one_of(
        st.sampled_from(options(family)),
        st.builds(VideoRequest, fps=st.floats(0.1, 30.0)),
        st.builds(VideoRequest, num_frames=st.integers(1, 40)),
        st.builds(VideoRequest, min_pixels=px(4, 512), max_pixels=px(4, 2048)),
        st.builds(VideoRequest, total_pixels=px(1000, 40000)),
    )


def _drawn(family: str) -> Callable[..., None]:
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(frames=st.integers(1, 20000), fps=_FPS, size=st.tuples(st.integers(16, 700), st.integers(16, 700)),
           request=_request(family))  # fmt: skip
    # counterexamples found while writing the oracle, pinned (semantics §20.4 "What running showed")
    @example(frames=15, fps=0.0, size=(64, 48), request=VideoRequest(num_frames=8))
    @example(frames=15, fps=30.0, size=(64, 48), request=VideoRequest(num_frames=26))
    @example(frames=1, fps=30.0, size=(64, 48), request=VideoRequest())
    @example(frames=30, fps=30.0, size=(64, 48), request=VideoRequest(num_frames=26))  # arange: 27 indices, one 30
    @example(frames=2, fps=1.0, size=(16, 127), request=VideoRequest(min_pixels=3136, max_pixels=3136))  # w -> 0
    def check(frames: int, fps: float, size: tuple[int, int], request: VideoRequest) -> None:
        clip = Clip(frames, fps, *size)
        paths = trained(family)
        for row in ROWS:
            a = outcome(partial(oracle.plan, family, row), clip, request)
            b = outcome(paths[row].plan, clip, request)
            assert difference(a, b) is None, f"{row} {label(clip, request)}: {difference(a, b)}"

    return check


@real_code
@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_equals_trained_and_card_on_drawn_clips(family: str) -> None:
    trained(family)
    _drawn(family)()


# --- the glue, against the processor run on real frames ---------------------------------------------------------------
@real_code
@pytest.mark.parametrize("family", FAMILIES)
def test_trained_plan_equals_the_processor_run_on_frames(family: str) -> None:
    """The TRAINED plan's indices, grid, tokens and times equal the processor's own output on index-coded frames,
    through the model's processor class's own ``_process_videos`` (``video_metadata.frames_indices``,
    ``video_grid_thw``, ``pixel_values_videos`` rows, Qwen2.5-VL's ``second_per_grid_ts``, Qwen3-VL's timestamp
    text from ``replace_video_token``; semantics §20.4)."""
    from deferlab.properties import video_trained

    path = trained(family)["TRAINED"]
    proc, checked, refused = path.proc, 0, 0
    outer = video_trained.model_processor(family, proc)
    for frames, fps in ((3, 30.0), (4, 24.0), (15, 30.0), (30, 30.0), (61, 29.97), (90, 12.5)):
        clip = Clip(frames, fps, 64, 48)
        video = np.stack([oracle.encode_index(48, 64, i) for i in range(frames)])
        for request in (*options(family), VideoRequest(num_frames=26)):  # 30 frames, 26: arange's index 30
            plan = outcome(path.plan, clip, request)
            sample, _ = path._options(request)
            kw = {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}
            size = {"shortest_edge": request.min_pixels or proc.size["shortest_edge"],
                    "longest_edge": request.max_pixels or proc.size["longest_edge"]}  # fmt: skip
            meta = {"total_num_frames": frames, "fps": fps, "width": 64, "height": 48}
            try:
                out, texts = outer._process_videos([video], video_metadata=[meta], do_sample_frames=sample,
                                                   return_metadata=True, size=size, return_tensors="pt",
                                                   cap_pixels_per_frame=False, **kw)  # fmt: skip
            except (ValueError, ZeroDivisionError, IndexError):
                assert plan == "refused", label(clip, request)
                refused += 1
                continue
            grid = tuple(int(v) for v in out["video_grid_thw"][0])
            taken = out["video_metadata"][0].frames_indices
            idx = tuple(int(i) for i in (taken if taken is not None else range(frames)))
            assert plan.grid == grid, label(clip, request)
            assert plan.indices[: len(idx)] == idx and len(plan.indices) == len(idx) + plan.padded
            assert out["pixel_values_videos"].shape[0] == math.prod(grid) == plan.tokens * proc.merge_size**2
            if family == "qwen2.5-vl":
                times = [t * float(out["second_per_grid_ts"][0]) for t in range(grid[0])]
                assert np.abs(np.subtract(times, plan.times)).max() <= 1e-6, label(clip, request)
            else:
                assert re.findall(r"<([0-9.]+) seconds>", texts[0]) == [f"{t:.1f}" for t in plan.times]
            checked += 1
    print(f"{family}: {checked} runs equal their plans, {refused} refused by both")
    assert checked + refused == 42 and checked >= 20


# --- torch's index arithmetic, restated -------------------------------------------------------------------------------
def test_torch_index_restatements_equal_torch() -> None:
    """`torch_arange_int` and `torch_linspace_round` equal torch's own on 4,000 drawn (N, n) pairs and the grid's
    edges (semantics §20.4: the float32 arithmetic, the ceil length, the SIMD chunks)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(204)
    pairs = [(int(a), int(b)) for a, b in zip(rng.integers(2, 300000, 4000), rng.integers(1, 800, 4000), strict=True)]
    pairs += [(n, k) for n in range(1, 40) for k in range(1, n + 1)]
    for total, n in pairs:
        if n <= total:
            want = torch.arange(0, total, total / n).int().numpy()
            assert np.array_equal(oracle.torch_arange_int(total, n), want), (total, n)
        want = torch.linspace(0, total - 1, n).round().long().numpy()
        assert np.array_equal(oracle.torch_linspace_round(total, n), want), (total, n)


def test_unknown_family_and_row_are_refused_in_one_line() -> None:
    with pytest.raises(Unsupported, match="accepted: qwen2.5-vl, qwen3-vl"):
        oracle.plan("internvl", "TRAINED", Clip(10, 30.0), VideoRequest())
    with pytest.raises(InputValueError, match="accepted: TRAINED, CARD"):
        oracle.plan("qwen3-vl", "SERVED", Clip(10, 30.0), VideoRequest())


@real_code
def test_card_decode_says_what_to_install_or_takes_its_plan() -> None:
    """CARD's ``decode`` runs qwen-vl-utils' ``fetch_video`` where it has a reader (torchcodec, decord), else one
    line naming what to install (semantics §20.4 "What running showed")."""
    from deferlab.properties import clips

    spec, path = clips.KINDS["constant"], trained("qwen3-vl")["CARD"]
    try:
        got = path.decode(clips.encode(spec), VideoRequest())
    except Unsupported as e:
        assert "\n" not in str(e) and "pip install decord" in str(e), str(e)
        return
    want = oracle.card_plan("qwen3-vl", clips.clip_of(spec), VideoRequest())
    assert got.indices == want.indices[: len(want.indices) - want.padded]


@pytest.mark.extra("video")
def test_oracle_decode_takes_its_plan_from_the_bytes() -> None:
    """The ORACLE row's ``decode``: PyAV's frames at the oracle's indices, which the frames' own codes confirm."""
    from deferlab.properties import clips, video_trained

    spec, request = clips.KINDS["ntsc"], VideoRequest(fps=4.0)
    with pytest.raises(Unsupported, match="accepted: qwen2.5-vl, qwen3-vl"):
        video_trained.trained_paths("internvl")
    for family in FAMILIES:
        got = video_trained.oracle_path(family).decode(clips.encode(spec), request)
        assert [oracle.read_index(f) for f in got.frames] == list(got.indices or ())
        assert got.indices == oracle.trained_plan(family, clips.clip_of(spec), request).indices


# --- the index code and the clips -------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(48, 64), (46, 62), (720, 1280), (16, 16)])
def test_index_code_survives_a_resize(size: tuple[int, int]) -> None:
    from PIL import Image

    h, w = size
    for index in (0, 1, 0x5A5A, 0xFFFF, 12345):
        frame = oracle.encode_index(h, w, index)
        assert oracle.read_index(frame) == index
        for target in ((56, 56), (w // 2 + 16, h // 2 + 16), (2 * w, 2 * h)):
            small = np.asarray(Image.fromarray(frame).resize(target, Image.Resampling.BICUBIC))
            assert oracle.read_index(small) == index, (size, target, index)


def test_index_code_refuses_what_it_cannot_read() -> None:
    with pytest.raises(InputValueError, match="unreadable index frame 64x48: block 0"):
        oracle.read_index(np.full((48, 64, 3), 128, np.uint8))
    with pytest.raises(InputValueError, match="not mid-grey"):
        oracle.read_index(np.zeros((48, 64, 3), np.uint8))
    with pytest.raises(InputValueError, match="check bits"):  # turned by a decoder that applies a rotation
        oracle.read_index(np.rot90(oracle.encode_index(48, 64, 1)).copy())
    with pytest.raises(InputValueError, match="out of range; accepted: 0..65535"):
        oracle.encode_index(48, 64, 1 << 16)


@pytest.mark.extra("video")
@pytest.mark.parametrize("kind", ["constant", "ntsc", "vfr", "short", "one", "long", "odd", "rotation90", "webm"])
def test_clip_kinds_round_trip(kind: str) -> None:
    """Each KIND's every decoded frame reads back its own index; the container's metadata is the spec's (semantics
    §20.3; odd sides are encoded one pixel smaller; the rotation is the stream's display matrix)."""
    from deferlab.properties import clips

    spec = clips.KINDS[kind]
    if not clips.codec_available(spec):
        pytest.skip(f"no {clips.CODECS[spec.container]} encoder in this PyAV build")
    data = clips.encode(spec)
    assert clips.encode(spec) == data  # the cached copy
    frames = clips.decode(data)
    assert [oracle.read_index(f) for f in frames] == list(range(spec.frames))
    clip = clips.clip_of(spec)
    assert (clip.frames, clip.width, clip.height) == (spec.frames, *spec.even_size)
    assert abs(clip.fps - spec.fps) < (0.02 * spec.fps if spec.vfr else 1e-9), clip.fps  # VFR: the jitter's mean
    assert clips.rotation_of(data) == spec.rotation


# What transformers' own loaders do with each kind (semantics §20.4 "What running showed"): "ok" (the frames carry
# the indices the loader says it took, which are the oracle's plan of the container's metadata), or a recorded
# departure: PyAV reads a WebM's frame count as 0 (refused), OpenCV estimates a WebM's count from its duration
# (more indices than frames) and applies the rotation (the frames' codes no longer read).
LOADER_RESULTS = {("pyav", "webm"): "refused", ("opencv", "webm"): "miscounted", ("opencv", "rotation90"): "rotated"}
KIND_NAMES = ["constant", "ntsc", "vfr", "short", "one", "long", "odd", "rotation90", "webm"]


@real_code
@pytest.mark.parametrize("backend", ["pyav", "opencv"])
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_trained_decode_takes_the_frames_its_plan_names(kind: str, backend: str) -> None:
    """TRAINED's ``load_video`` on the bytes (C16 on bytes, semantics §20.2): per `LOADER_RESULTS`."""
    from deferlab.properties import clips, video_trained

    spec, expected = clips.KINDS[kind], LOADER_RESULTS.get((backend, kind), "ok")
    if not clips.codec_available(spec):
        pytest.skip(f"no {clips.CODECS[spec.container]} encoder in this PyAV build")
    data, clip = clips.encode(spec), clips.clip_of(spec)
    for family in FAMILIES:
        trained(family)
        path = video_trained.TrainedPath(family, backend)
        for request in (VideoRequest(), VideoRequest(fps=1.0)):
            where = (family, backend, kind, request.label())
            want = outcome(partial(oracle.trained_plan, family), clip, request)
            if expected == "refused":
                with pytest.raises(Refused):
                    path.decode(data, request)
                continue
            try:
                got = path.decode(data, request)
            except Refused:  # the loader's own sampling refused, as the plan's
                assert want == "refused", where
                continue
            said = sorted(set(got.indices or ()))
            if expected == "miscounted":  # only the said indices below the true count exist
                assert got.total > spec.frames and len(got.frames) < len(said), where
                assert [oracle.read_index(f) for f in got.frames] == [i for i in said if i < spec.frames], where
                continue
            if expected == "rotated":
                assert got.frames.shape[1:3] == spec.even_size, where  # (W, H) as rows and columns: turned
                with pytest.raises(InputValueError):
                    [oracle.read_index(f) for f in got.frames]
                continue
            assert [oracle.read_index(f) for f in got.frames] == said, where
            if want != "refused":  # a plan refused by the processor's resize (one frame) still loads
                assert got.indices == want.indices[: len(want.indices) - want.padded], where
