"""vLLM's Gemma 4 video path (semantics §20.10(b)) on the in-process release, run for real with the transformers
and torchvision it pins, against the TRAINED side (transformers' own ``Gemma4VideoProcessor``, run in a child
process: this one holds the release's transformers): the hand-worked points the fragment predicted before vLLM ran,
a grid slice where every difference must be one of the predicted kinds, and C19 on two encoded kinds read back
from their pixels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deferlab.reference.system.video import Clip, Unsupported, VideoRequest, grid_clips
from tests.impl.vllm.video_support import marks, served, trained_decode, trained_plans, video_path

pytestmark = marks("Gemma 4 facts of semantics §20.10(b)")
VIDEO = pytest.mark.extra("video")
# (clip, request): the worked points, each the smallest the fragment predicted for its kind of difference
POINTS = [
    (Clip(1, 1.0), VideoRequest()),  # TRAINED refuses 32 > 1 frames; vLLM takes [0]
    (Clip(32, 1.0), VideoRequest()),  # agreement: every frame on both sides
    (Clip(33, 1.0), VideoRequest()),  # linspace against i x N // 32: frame 31 is 32 against 31 (and 32 s against 31 s)
    (Clip(9, 1.0), VideoRequest(num_frames=8)),  # the last frame 8 against 7
    (Clip(120, 30.0), VideoRequest(fps=1.0)),  # TRAINED: fps beside the filled num_frames; vLLM: 4 frames
    (Clip(120, 0.0), VideoRequest()),  # no header rate: both say index / 24
    (Clip(900, 30.0, 1280, 720), VideoRequest()),  # a large frame: 528x288, 66 tokens a frame on both sides
]


def _linspace(n_frames: int, n: int) -> list[int]:
    """The generic loader's rule as §20.10(b) states it: every frame when n = N, else linspace truncated."""
    return list(range(n_frames)) if n == n_frames else np.linspace(0, n_frames - 1, n, dtype=int).tolist()


@pytest.fixture(scope="module")
def path(vllm_source):
    return video_path(vllm_source, "gemma4")


@pytest.fixture(scope="module")
def trained():
    return trained_plans("gemma4", POINTS)


def test_the_path_and_the_loader_vllm_picks(path, vllm_source):
    assert (path.label, path.family, path.real_code, path.system) == ("VLLM", "gemma4", True, vllm_source.name)
    # no vLLM loader is registered for Gemma 4's video processor: VideoMediaIO takes the generic opencv one
    assert (path.processor_name, path.backend, path.max_soft_tokens) == ("Gemma4VideoProcessor", None, 70)
    path.plan(Clip(40, 30.0), VideoRequest())
    assert "VideoBackend.compute_frames_index_to_sample" in path.provenance()["sampling"]
    with pytest.raises(Unsupported, match="total_pixels"):
        path.plan(Clip(10, 30.0), VideoRequest(total_pixels=10**6))
    pair = path.plan(Clip(40, 30.0), VideoRequest(min_pixels=50176, max_pixels=200704))
    assert pair == path.plan(Clip(40, 30.0), VideoRequest()) and "ignored" in pair.notes[0]


def test_the_hand_worked_points(path):
    got = [served(path, c, r) for c, r in POINTS]
    assert got[0]["indices"] == [0] and got[0]["times"] == [0.0]
    assert got[1]["indices"] == list(range(32))
    assert got[2]["indices"] == [*range(31), 32] and got[2]["times"] == [*map(float, range(31)), 32.0]
    assert got[3]["indices"] == [0, 1, 2, 3, 4, 5, 6, 8]
    assert got[4]["indices"] == [0, 39, 79, 119] and got[4]["times"] == [0.0, 1.0, 2.0, 3.0]  # min(32, 120, 4 s x 1)
    assert got[5]["indices"] == _linspace(120, 32) and got[5]["times"] == [float(i // 24) for i in _linspace(120, 32)]
    for g, n in zip(got[:6], (1, 32, 32, 8, 4, 32), strict=True):  # 64x48 -> 432x336: 21 x 27 patches, 63 tokens
        assert (g["size"], g["grid"], g["tokens"], g["padded"]) == ([432, 336], [n, 21, 27], 63 * n, 0)
    assert (got[6]["size"], got[6]["grid"], got[6]["tokens"]) == ([528, 288], [32, 18, 33], 66 * 32)
    assert path.plan(Clip(10, 30.0, 1080, 1920), VideoRequest()).size == (288, 528)
    assert path.plan(Clip(120, 30.0), VideoRequest(num_frames=3)).stamps == ("00:00 ", " 00:01 ", " 00:03 ")


def test_a_stamp_encoded_with_special_tokens_reads_back_with_them() -> None:
    """The stand-in tokenizer writes Gemma's ``<bos>`` when asked for special tokens (the checkpoint's tokenizer adds
    it), so vLLM encoding its stamps with them would read back as a differing stamp, not as the same seconds."""
    from deferlab.impl.vllm.video_gemma4 import BOI, EOI, _read_back, _Text

    plain = _Text.encode(" 00:01 ", add_special_tokens=False) + [BOI, EOI]
    special = _Text.encode(" 00:01 ", add_special_tokens=True) + [BOI, EOI]
    assert _read_back(plain) == ((1.0,), (0,), (" 00:01 ",))
    assert _read_back(special) == ((1.0,), (0,), ("<bos> 00:01 ",))


def test_the_predicted_verdicts_at_their_smallest_clips(path, trained):
    got = [served(path, c, r) for c, r in POINTS]
    # [1@1]: one-sided (C16, C17, C18 fail); [120@30; fps=1]: TRAINED's fps is mutually exclusive with num_frames
    assert trained[0]["refused"] and "refused" not in got[0]
    assert "mutually exclusive" in trained[4]["why"] and "refused" not in got[4]
    # N = 32 and the unknown rate agree on every field... the latter only in count, size and tokens
    assert got[1] == trained[1]
    assert {k: v for k, v in got[5].items() if k not in ("indices", "times")} == {
        k: v for k, v in trained[5].items() if k not in ("indices", "times")
    }
    # [33@1]: indices and times differ only at frame 31; size, grid, tokens, padded agree (C17 holds there)
    for g, w, at in ((got[2], trained[2], 31), (got[3], trained[3], 7)):
        assert [k for k in range(len(g["indices"])) if g["indices"][k] != w["indices"][k]] == [at]
        assert {k: v for k, v in g.items() if k not in ("indices", "times")} == {
            k: v for k, v in w.items() if k not in ("indices", "times")
        }
    assert (got[2]["times"][31], trained[2]["times"][31]) == (32.0, 31.0)
    assert got[6]["size"] == trained[6]["size"] and got[6]["tokens"] == trained[6]["tokens"]


SLICE = [c for c in grid_clips() if c.frames <= 60]
SLICE_REQUESTS = [VideoRequest(), VideoRequest(num_frames=8), VideoRequest(num_frames=16), VideoRequest(fps=1.0)]


def test_a_grid_slice_differs_only_as_predicted(path):
    points = [(c, r) for r in SLICE_REQUESTS for c in SLICE]
    seen = set()
    for (clip, request), w in zip(points, trained_plans("gemma4", points), strict=True):
        g, k = served(path, clip, request), request.num_frames or 32
        assert "refused" not in g, (clip, request, g)
        if request.fps is not None or k > clip.frames:  # TRAINED refuses, vLLM serves: one-sided
            assert "refused" in w, (clip, request, w)
            seen.add("one-sided")
            continue
        same = {k_: v for k_, v in g.items() if k_ not in ("indices", "times")}
        assert same == {k_: v for k_, v in w.items() if k_ not in ("indices", "times")}, (clip, request, g, w)
        assert g["indices"] == _linspace(clip.frames, k), (clip, request, g)
        assert g["times"] == [float(math.floor(i / clip.fps)) for i in g["indices"]], (clip, request, g)
        kind = "equal" if clip.frames == k else "indices"
        assert (g["indices"] == w["indices"]) == (kind == "equal"), (clip, request, g, w)
        seen.add(kind)
    assert seen == {"equal", "indices", "one-sided"}


@VIDEO
@pytest.mark.parametrize("kind", ["constant", "short"])
def test_c19_decoded_frames_against_trained(path, kind, tmp_path):
    from deferlab.properties import clips
    from deferlab.reference.oracle.video import read_index

    out = tmp_path / "trained.npy"
    said = trained_decode("gemma4", kind, out)
    got = path.decode(clips.encode(clips.KINDS[kind]), VideoRequest())
    assert [read_index(f) for f in got.frames] == list(got.indices)
    if kind == "short":  # 3 frames: TRAINED refuses (32 > 3), vLLM reads every frame
        assert "REFUSED" in said and list(got.indices) == [0, 1, 2]
        return
    want = [read_index(f) for f in np.load(out)]
    assert want == [i * 120 // 32 for i in range(32)] and list(got.indices) == _linspace(120, 32)
    assert (want[5], got.indices[5]) == (18, 19)  # the first frame the two take differently


def test_the_soft_token_count_is_vllms_own_and_handed_on_as_returned(path, monkeypatch):
    """§20.10(b) "vLLM's soft-token count", on the release's own ``_compute_num_soft_tokens``: the 190x142 pin agrees
    with TRAINED and the stated rule (63 a frame); at the 70:1 tie the release counts 69 where the processor's size
    (48x3360) gives TRAINED 70, as the rule states; and a count that is no int (a mutant's ``/``) is handed on as the
    release hands it, so its ``[token] * n`` refuses, where casting it would have hidden it."""
    from deferlab.reference.oracle import video_gemma4 as g4
    from deferlab.reference.oracle import video_served as vs

    request = VideoRequest(num_frames=12)
    for clip, per_frame in ((Clip(12, 30.0, 190, 142), 63), (Clip(12, 30.0, 17, 1190), 69)):
        got = path.plan(clip, request)
        assert got == vs.vllm_gemma4_plan("gemma4", clip, request) and got.tokens == 12 * per_frame
        assert got.size == g4.plan(clip, request).size
    assert g4.plan(Clip(12, 30.0, 17, 1190), request).tokens == 12 * 70
    own = type(path._info)._compute_num_soft_tokens
    monkeypatch.setattr(type(path._info), "_compute_num_soft_tokens", lambda *a, **k: float(own(*a, **k)))
    path._sizes.clear()
    with pytest.raises(TypeError):
        path.plan(Clip(12, 30.0, 64, 48), request)
    path._sizes.clear()
