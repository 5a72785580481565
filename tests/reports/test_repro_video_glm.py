"""GLM-4.1V's video reproducers on vLLM and SGLang (`reports.repro.video`, `reports.repro.video_glm_texts`;
semantics §20.4-§20.6): written from rows as the claims record them, standalone, and run against the cached releases
(vLLM 0.34.0; SGLang 0.5.23, where a client's fps above 2 is clamped and its pixel bounds dropped).

Why these rows: each counterexample is the smallest of its kind on vLLM 0.34.0 (`tests/impl/vllm/test_video_glm.py`
holds deferlab's own path to them): the loader choosing no frame of 1 frame at 5 fps (vLLM refuses, the checkpoint
takes [0, 0]); 602 frames at 1 fps under fps=4, which vLLM reads whole and its processor samples again at its own
2 fps; an odd 3 frames handed on from 8 at 5 fps (padded 1 against the checkpoint's 0); the pixel pair vLLM drops
(112x84 against 196x140). A script must fail on 0.34.0 with that difference and pass on a clip the sides agree on
(120 frames at 30 fps), so it can do both. Both engines' reproducer sets name GLM-4.1V's companions
(`reports.repro.engine_sets`), as the script's header must for ``deferlab repro``; `glm_companions` checks it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.impl.vllm.video import COMPANIONS
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import engine_sets
from tests.reports.repro_video_support import assert_standalone, expect, outcomes
from tests.reports.test_repro_video import DEFAULTS, clip, code, consts, engine_of, imports, row

FAMILY = "glm-4.1v"
FPS4 = DEFAULTS.replace("fps=None", "fps=4")
PAIR = DEFAULTS.replace("min_pixels=None", "min_pixels=50176").replace("max_pixels=None", "max_pixels=200704")
_REFUSED = "the served side refused what the trained side takes (Refused: ValueError: vLLM's OpenCV codec: "
C16 = row("C16", f"{FAMILY}:VLLM", f"AssertionError: [1@5 64x48; defaults] {_REFUSED}the loader chose no frame",
          [clip(1, 5.0), DEFAULTS])  # fmt: skip
C16_FPS = row("C16", f"{FAMILY}:VLLM", "AssertionError: [602@1 64x48; fps=4] frames taken differ from the trained "
              "side's: index 1: 2 != 1", [clip(602, 1.0), FPS4])  # fmt: skip
C17 = row("C17", f"{FAMILY}:VLLM", "AssertionError: [8@5 64x48; defaults] geometry differs from the trained side's: "
          "padded 1 != 0", [clip(8, 5.0), DEFAULTS])  # fmt: skip
C17_PAIR = row("C17", f"{FAMILY}:VLLM", "AssertionError: [1@1 64x48; min_pixels=50176, max_pixels=200704] geometry "
               "differs from the trained side's: size (112, 84) != (196, 140)", [clip(1, 1.0), PAIR])  # fmt: skip
C18 = row("C18", f"{FAMILY}:VLLM", f"AssertionError: [1@5 64x48; defaults] {_REFUSED}the loader chose no frame",
          [clip(1, 5.0), DEFAULTS])  # fmt: skip
C18_FPS = row("C18", f"{FAMILY}:VLLM", "AssertionError: [602@1 64x48; fps=4] times differ from the trained side's: "
              "300 times != 301", [clip(602, 1.0), FPS4])  # fmt: skip
AGREE = [clip(120, 30.0), DEFAULTS]
# engine -> (modules a script imports, the engine's own functions it calls)
CALLS = {
    "vllm": (("vllm.multimodal.media.video",), ("compute_frames_index_to_sample", "_merge_kwargs",
                                                "_construct_video_placeholder", "read_frames")),
    "sglang": (("sglang.srt.multimodal.processors", "sglang.srt.parser"), ("process_content_for_template_format",
               "_merge_glm_video_configs", "glm_budget_kwargs", "glm_sample_and_decode_sync")),
}  # fmt: skip


# SGLang 0.5.23 (semantics §20.5, GLM-4.1V): a client's fps above the processor's 2 is clamped to it, its pixel
# bounds have no field and are dropped; each row is a failing cell of its claim there
SGLANG_C16 = row("C16", f"{FAMILY}:SGLANG", "AssertionError: [3@5 64x48; fps=4] frames taken differ from the trained "
                 "side's: index 1: 0 != 2", [clip(3, 5.0), DEFAULTS.replace("fps=None", "fps=4.0")])  # fmt: skip
SGLANG_C17 = row("C17", f"{FAMILY}:SGLANG", "AssertionError: [1@1 64x48; min_pixels=50176, max_pixels=200704] "
                 "geometry differs from the trained side's: size (112, 84) != (196, 140)", [clip(1, 1.0), PAIR])  # fmt: skip
SGLANG_C18 = row("C18", f"{FAMILY}:SGLANG", "AssertionError: [602@1 64x48; fps=4] times differ from the trained "
                 "side's: 300 times != 301", [clip(602, 1.0), FPS4])  # fmt: skip

# C19: the clip kinds (properties.clips.KINDS) as a row names them; vLLM's loader chooses no frame of 'short' (0.1 s),
# SGLang's decord refuses a rotation tag; 'constant' both take as the checkpoint does
KIND = {
    "constant": "ClipSpec(frames=120, fps=30.0, width=64, height=48, container='mp4', vfr=False, rotation=0)",
    "short": "ClipSpec(frames=3, fps=30.0, width=64, height=48, container='mp4', vfr=False, rotation=0)",
    "rotation90": "ClipSpec(frames=120, fps=30.0, width=64, height=48, container='mp4', vfr=False, rotation=90)",
}
C19 = {
    "vllm": row("C19", f"{FAMILY}:VLLM", "AssertionError: [short] the served side refused what the trained side "
                "takes", ["short", KIND["short"]]),
    "sglang": row("C19", f"{FAMILY}:SGLANG", "AssertionError: [rotation90] the served side refused what the trained "
                  "side takes", ["rotation90", KIND["rotation90"]]),
}  # fmt: skip


@pytest.fixture
def glm_companions(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's and SGLang's reproducer sets name GLM-4.1V's companions, those its video paths load."""
    for found in (engine_sets.VLLM, engine_sets.SGLANG):
        assert found.companions[FAMILY] == tuple(COMPANIONS[FAMILY])


@pytest.mark.parametrize(
    ("r", "want"),
    [
        (C16, {"FRAMES": 1, "FPS": 5.0, "OPTIONS": {}, "MEDIA_IO_KWARGS": {}, "PROCESSOR": "Glm4vVideoProcessor"}),
        (C16_FPS, {"FRAMES": 602, "OPTIONS": {"fps": 4}, "MEDIA_IO_KWARGS": {"fps": 4}}),
        (C17_PAIR, {"OPTIONS": {"min_pixels": 50176, "max_pixels": 200704}, "MEDIA_IO_KWARGS": {}}),
        (C18, {"INFO": ("vllm.model_executor.models.glm4_1v", "Glm4vProcessingInfo")}),
        (
            SGLANG_C17,
            {
                "OPTIONS": {"min_pixels": 50176, "max_pixels": 200704},
                "VIDEO_URL_FIELDS": {"min_pixels": 50176, "max_pixels": 200704},
            },
        ),  # fmt: skip
    ],
    ids=["C16", "C16-fps", "C17-pixels", "C18", "sglang-C17"],
)
def test_a_glm_row_becomes_a_standalone_script_calling_the_engine_and_the_checkpoints_processor(
    r: dict, want: dict
) -> None:
    """The script states the clip, the request's options under the engine's names (vLLM's loader gets fps /
    num_frames; SGLang's request parsing a client's video_url fields), the checkpoint's video config (and vLLM's
    processing-info class), imports nothing of deferlab, and calls the engine's own steps (`CALLS`) and the
    checkpoint's sample_frames and replace_video_token rather than restating them."""
    text = code(r)
    assert text is not None, r
    got = consts(text)
    assert {k: got.get(k) for k in want} == want
    assert got["VIDEO_CONFIG"]["fps"] == 2 and got["VIDEO_CONFIG"]["do_sample_frames"] is True
    modules, calls = CALLS[engine_of(r)]
    assert_standalone(text, r, (*modules, "transformers.models.glm4v.processing_glm4v"),
                      (*calls, "replace_video_token", ".sample_frames("))  # fmt: skip


@pytest.mark.parametrize(
    ("engine", "calls"),
    [("vllm", ("MediaConnector(", ".fetch_video(")), ("sglang", ("load_video(", "glm_sample_and_decode_sync("))],
)
def test_a_glm_c19_row_becomes_a_script_decoding_with_the_engines_loader(engine: str, calls: tuple[str, ...]) -> None:
    """C19's script states the kind, decodes with the engine's own loader and with transformers' load_video under
    GLM's sample_frames, and restores the sampler's repeated index on the checkpoint's side."""
    text = code(C19[engine])
    assert text is not None
    assert list(consts(text)["KINDS"]) == [C19[engine]["counterexample"][0]]
    assert not any("deferlab" in m for m in imports(text))
    for call in (*calls, "load_video(", "partial(proc.sample_frames", "read.index(i)"):
        assert call in text, call
    assert text.count("def _trained_frames(") == 1


@pytest.mark.parametrize(
    ("r", "why"),
    [
        ({**C16, "policy": f"{FAMILY}:LMDEPLOY"}, "LMDeploy serves no GLM-4.1V video (semantics §20.7)"),
        ({**C17, "policy": f"{FAMILY}:VLLM host-normalized"}, "a served path that is not the default"),
        (
            {**C16, "counterexample": [clip(1, 5.0), DEFAULTS.replace("total_pixels=None", "total_pixels=9")]},
            "total_pixels: no vLLM option",
        ),  # fmt: skip
    ],
)
def test_glm_rows_no_template_fits_get_no_file(r: dict, why: str) -> None:
    assert code(r) is None, why


def test_the_header_names_the_companions_the_script_computes_with(tmp_path: Path, glm_companions: None) -> None:
    system = {"name": "vllm-0.34.0", "engine": "vllm", "kind": "wheel", "version": "0.34.0", "commit": None}
    written, missing = repro.write_reproducers([C16, C17, C18], system, "0.34.0", tmp_path, source="a test",
                                               engine="vllm")  # fmt: skip
    assert sorted(p.name for p in written) == [f"{c}-{FAMILY}-vllm-0.34.0.py" for c in ("C16", "C17", "C18")], missing
    info = repro.read_header(written[0])
    assert (info["claim"], info["engine"], info["family"], info["companions"]) == (
        "C16", "vllm", FAMILY, "transformers,torchvision")  # fmt: skip
    system = {**system, "name": "sglang-0.5.23", "engine": "sglang", "version": "0.5.23"}
    written, _ = repro.write_reproducers([SGLANG_C16], system, "0.5.23", tmp_path / "sglang", source="a test",
                                         engine="sglang")  # fmt: skip
    assert repro.read_header(written[0])["companions"] == "transformers,torchvision"


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts' trained side
def test_each_glm_script_fails_on_0_34_0_as_recorded_and_passes_where_the_sides_agree(
    tmp_path: Path, glm_companions: None
) -> None:
    """One child on vLLM 0.34.0 with its companions: each recorded row's script fails with the difference the row
    recorded (vLLM's refusal where its loader chose no frame, written by the release's own read_frames; the frames
    and times of the clip it reads whole and samples again; the padding; the dropped pixel pair), and each
    claim's script on 120 frames at 30 fps passes."""
    from deferlab.reference.system import extras

    if (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)  # vLLM's loader path runs its ModelConfig (pydantic) and numba kernels
    groups = {
        "recorded": [C16, C17, C18],
        "more": [C16_FPS, C17_PAIR, C18_FPS],
        "agree": [{**r, "counterexample": AGREE} for r in (C16, C17, C18)],
    }
    by = outcomes(tmp_path, groups, "vllm", "0.34.0")
    messages = {  # each part in the failure, in order (the empty max()'s wording is Python's own)
        "C16-recorded": ("frames taken refused (ValueError: max() ", ") != the checkpoint's [0, 0]"),
        "C16-more": ("frames taken [0, 2, 3, 4, 5,", "!= the checkpoint's [0, 1, 2, 3, 4, 5,"),
        "C17-recorded": ("(grid, padded) ([2, 4, 4], 1) != the checkpoint's ([2, 4, 4], 0)",),
        "C17-more": ("(grid, padded) ([1, 6, 8], 0) != the checkpoint's ([1, 10, 14], 0)",),
        "C18-recorded": ("times refused (ValueError: max() ", ") != [0.0]"),
        "C18-more": ("300 times [0.0, 3.0, 5.0, 7.0,", "!= the checkpoint's 301 [0.0, 2.0, 4.0, 6.0,"),
    }
    expect(by, messages)


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts' trained side
def test_each_glm_script_fails_on_sglang_0_5_23_and_passes_where_the_sides_agree(
    tmp_path: Path, glm_companions: None
) -> None:
    """One child on SGLang 0.5.23: its own request parsing, merge (the clamp) and sampling, then the checkpoint's
    processor on its frames; each row's script fails with its difference, each claim's on 120@30 passes."""
    groups = {
        "recorded": [SGLANG_C16, SGLANG_C17, SGLANG_C18],
        "agree": [{**r, "counterexample": AGREE} for r in (SGLANG_C16, SGLANG_C17, SGLANG_C18)],
    }
    messages = {
        "C16-recorded": ("frames taken [0, 0] != the checkpoint's [0, 2]",),
        "C17-recorded": ("(grid, padded) ([1, 6, 8], 0) != the checkpoint's ([1, 10, 14], 0)",),
        "C18-recorded": ("300 times [0.0, 3.0, 5.0, 7.0,", "!= the checkpoint's 301 [0.0, 2.0, 4.0, 6.0,"),
    }
    expect(outcomes(tmp_path, groups, "sglang", "0.5.23"), messages)


@pytest.mark.slow
@pytest.mark.extra("video")  # the clips (PyAV), SGLang's decoder (decord)
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "message"),
    [
        ("vllm", "0.34.0", "the served side refused what the trained side takes: refused (ValueError: max() "),
        ("sglang", "0.5.23", "the served side refused what the trained side takes: refused (DECORDError: "),
    ],
    ids=["vllm", "sglang"],
)
def test_each_glm_c19_script_fails_on_its_kind_and_passes_on_a_constant_clip(
    tmp_path: Path, glm_companions: None, engine: str, spec: str, message: str
) -> None:
    """C19's script makes the clip, hands its bytes to the engine's own loader (vLLM's fetch_video, SGLang's
    load_video and glm_sample_and_decode_sync) and to transformers' load_video with GLM's sampler (its repeated
    index restored): vLLM refuses 'short' where the checkpoint takes [0, 0], SGLang's decord refuses the rotation
    tag; each passes on 'constant', SGLang's on 'short' too (the checkpoint's repeated index restored)."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)
    groups = {"recorded": [C19[engine]], "agree": [{**C19[engine], "counterexample": ["constant", KIND["constant"]]}]}
    if engine == "sglang":  # 'short': one index, GLM's sampler repeats it; PyAV reads it once, restored (§20.4)
        groups["short"] = [{**C19[engine], "counterexample": ["short", KIND["short"]]}]
    expect(outcomes(tmp_path, groups, engine, spec), {"C19-recorded": (message,)})
