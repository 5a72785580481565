"""Gemma 4's video reproducers on vLLM and SGLang (`reports.repro.video`, `reports.repro.video_gemma4_texts`,
`video_gemma4_pixels`; semantics §20.10): written from rows as the claims record them, standalone, and run against
the cached releases (vLLM 0.34.0, SGLang 0.5.23) through deferlab's loader.

Why these rows: they are the counterexamples of a versions run under ``--model gemma4`` (both engines' C16-C18:
``[1@1 64x48; defaults]``, which the checkpoint's processor refuses, 32 frames asked of 1, and both engines serve;
C19: vLLM's ``constant``, SGLang's ``short``, with the other failing kinds their evidence names), and the first
clips where both sides take frames and still differ (vLLM ``[33@1]``: linspace's frame 31 is 32, the checkpoint's
i x 33 // 32 is 31; SGLang ``[32@1]``: it tells position / 24 s, frame 1 at 0 s against 1 s). A script must fail on
its release with that difference and pass on a clip the sides agree on (32 frames: every frame on both sides; SGLang's
times only where the rate is 24), so it can do both. Both engines' sets name Gemma 4's companions, as ``deferlab
repro`` reads them from the script's header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.impl.vllm.video import COMPANIONS
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import engine_sets
from tests.reports.repro_video_support import assert_standalone, expect, outcomes
from tests.reports.test_repro_video import DEFAULTS, clip, code, consts, engine_of, imports, row

FAMILY = "gemma4"
_REFUSED = ("AssertionError: [1@1 64x48; defaults] the served side took what the trained side refuses (Refused: "
            "TRAINED gemma4: ValueError: When loading the video with num_frames=32, the requested number of frames "
            "exceeds total_num_frames=1)")  # fmt: skip
ONE = [clip(1, 1.0), DEFAULTS]
RECORDED = {
    engine: [row(cid, f"{FAMILY}:{engine.upper()}", _REFUSED, ONE) for cid in ("C16", "C17", "C18")]
    for engine in ("vllm", "sglang")
}
# the first clips both sides take and still differ on (semantics §20.10(b))
MORE = {
    "vllm": [row(cid, f"{FAMILY}:VLLM", "-", [clip(33, 1.0), DEFAULTS]) for cid in ("C16", "C18")],
    "sglang": [row("C18", f"{FAMILY}:SGLANG", "-", [clip(32, 1.0), DEFAULTS])],
}
AGREE = [clip(32, 1.0), DEFAULTS]
AGREE_24 = [clip(32, 24.0), DEFAULTS]  # SGLang's position / 24 s equals index / 24 s
_ONE_REFUSED = "refused (ValueError: When loading the video with num_frames=32, the requested number of frames exceeds "
# engine -> (modules a script imports, the engine's own functions it calls)
CALLS = {
    "vllm": (("vllm.multimodal.media.video", "PIL"), ("compute_frames_index_to_sample(", "_compute_num_soft_tokens(",
                                                      ".get_video_repl(", "._VIDEO_MAX_SOFT_TOKENS")),
    "sglang": (("sglang.srt.multimodal.processors",), ("Gemma4SGLangProcessor._video_decoder_to_tensor(owner",
                                                       "(videos=[video], do_sample_frames=False")),
}  # fmt: skip

# C19: the clip kinds (properties.clips.KINDS) as a row names them
_SPEC = "ClipSpec(frames={}, fps=30.0, width=64, height=48, container='mp4', vfr=False, rotation={})"
KIND = {
    "constant": _SPEC.format(120, 0),
    "short": _SPEC.format(3, 0),
    "one": _SPEC.format(1, 0),
    "rotation90": _SPEC.format(120, 90),
    "thirty-two": _SPEC.format(32, 0),  # not a KINDS clip: every frame on both sides
}
C19 = {
    "vllm": row("C19", f"{FAMILY}:VLLM", "AssertionError: [constant; defaults] pixels differ from the trained side's: "
                f"frames taken (read back) index 5: 19 != 18 also ['short', \"{KIND['short']}\"]: AssertionError: "
                "[short; defaults] the served side took what the trained side refuses", ["constant", KIND["constant"]]),
    "sglang": row("C19", f"{FAMILY}:SGLANG", "AssertionError: [short; defaults] the served side took what the trained "
                  f"side refuses also ['one', \"{KIND['one']}\"]: AssertionError: [one; defaults] the served side took "
                  f"what the trained side refuses; also ['rotation90', \"{KIND['rotation90']}\"]: AssertionError: "
                  "[rotation90; defaults] the served side refused what the trained side takes", ["short", KIND["short"]]),
}  # fmt: skip


@pytest.fixture
def gemma4_companions() -> None:
    """vLLM's and SGLang's reproducer sets name Gemma 4's companions, those its video paths load."""
    for found in (engine_sets.VLLM, engine_sets.SGLANG):
        assert found.companions[FAMILY] == tuple(COMPANIONS[FAMILY])


@pytest.mark.parametrize("r", [*RECORDED["vllm"], *RECORDED["sglang"]], ids=lambda r: f"{r['id']}-{r['policy']}")
def test_a_gemma4_row_becomes_a_standalone_script_calling_the_engine_and_the_checkpoints_processor(r: dict) -> None:
    """The script states the clip, the request's options under the engine's names, the checkpoint's video config
    (num_frames 32, sampling on, 70 soft tokens; vLLM's processing-info class and the image config it runs),
    imports nothing of deferlab, and calls the engine's own steps (`CALLS`) and the checkpoint's sample_frames and
    replace_video_token rather than restating them."""
    text = code(r)
    assert text is not None, r
    got = consts(text)
    assert (got["FRAMES"], got["FPS"], got["OPTIONS"], got["PROCESSOR"]) == (1, 1.0, {}, "Gemma4VideoProcessor")
    config = got["VIDEO_CONFIG"]
    assert (config["num_frames"], config["do_sample_frames"], config["max_soft_tokens"]) == (32, True, 70)
    if engine_of(r) == "vllm":
        assert got["INFO"] == ("vllm.model_executor.models.gemma4_mm", "Gemma4ProcessingInfo")
        assert got["IMAGE_CONFIG"]["image_processor_type"] == "Gemma4ImageProcessor" and got["MEDIA_IO_KWARGS"] == {}
    else:
        assert got["SERVER_VIDEO_CONFIG"] == {}
    modules, calls = CALLS[engine_of(r)]
    assert_standalone(text, r, (*modules, "transformers.models.gemma4.processing_gemma4"),
                      (*calls, ".replace_video_token(", ".sample_frames("))  # fmt: skip


def test_the_request_options_reach_each_engine_and_the_pixel_pair_gets_no_file() -> None:
    """num_frames reaches vLLM's loader and SGLang's server video dict under its own name (the processor's);
    min / max pixels, no kwarg of Gemma 4's video processor (semantics §20.10(a)), get no script; nor LMDeploy."""
    num = [clip(9, 1.0), DEFAULTS.replace("num_frames=None", "num_frames=8")]
    vllm, sglang = RECORDED["vllm"][0], RECORDED["sglang"][0]
    assert consts(code({**vllm, "counterexample": num}) or "")["MEDIA_IO_KWARGS"] == {"num_frames": 8}
    assert consts(code({**sglang, "counterexample": num}) or "")["SERVER_VIDEO_CONFIG"] == {"num_frames": 8}
    pair = [clip(1, 1.0), DEFAULTS.replace("min_pixels=None", "min_pixels=50176")]
    for r in (vllm, sglang):
        assert code({**r, "counterexample": pair}) is None
    assert code({**vllm, "policy": f"{FAMILY}:LMDEPLOY"}) is None


@pytest.mark.parametrize(("engine", "calls"), [("vllm", ("MediaConnector(", ".fetch_video(")),
                                               ("sglang", ("load_video(", "_video_decoder_to_tensor("))])  # fmt: skip
def test_a_gemma4_c19_row_becomes_a_script_decoding_with_the_engines_loader(
    engine: str, calls: tuple[str, ...]
) -> None:
    """C19's script states the kinds its row names, decodes with the engine's own loader and with transformers'
    load_video under the checkpoint's sample_frames (SGLang's with its Gemma 4 sampler, not the Qwen path's)."""
    text = code(C19[engine])
    assert text is not None
    want = {"vllm": ["constant", "short"], "sglang": ["short", "one", "rotation90"]}[engine]
    assert list(consts(text)["KINDS"]) == want
    assert consts(text)["PROCESSOR"] == "Gemma4VideoProcessor"
    assert not any("deferlab" in m for m in imports(text))
    for call in (*calls, "load_video(", "partial(proc.sample_frames"):
        assert call in text, call
    assert "preprocess_video" not in text


def test_the_header_names_the_companions_the_script_computes_with(tmp_path: Path, gemma4_companions: None) -> None:
    for engine, spec in (("vllm", "0.34.0"), ("sglang", "0.5.23")):
        system = {"name": f"{engine}-{spec}", "engine": engine, "kind": "wheel", "version": spec, "commit": None}
        written, missing = repro.write_reproducers(RECORDED[engine], system, spec, tmp_path / engine,
                                                   source="a test", engine=engine)  # fmt: skip
        assert sorted(p.name for p in written) == [f"{c}-{FAMILY}-{engine}-{spec}.py" for c in ("C16", "C17", "C18")]
        info = repro.read_header(written[0])
        assert (info["engine"], info["family"], info["companions"]) == (engine, FAMILY, "transformers,torchvision")


_GEOMETRY = "{'frames': 1, 'patches': [21, 27], 'soft_tokens': 63}; the checkpoint's Gemma4VideoProcessor "


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "served", "more"),
    [
        ("vllm", "0.34.0", "vLLM's video loader", {
            "C16-more": ("frames taken (frame 31: 32 against the checkpoint's 31)",),
            "C18-more": ("times (s) (frame 31: 32.0 against the checkpoint's 31.0)",),
        }),
        ("sglang", "0.5.23", "SGLang's video path", {
            "C18-more": ("times (s) (frame 1: 0.0 against the checkpoint's 1.0): SGLang's video path gives 32: [0.0, "
                         "0.0,", "the checkpoint's Gemma4VideoProcessor gives 32: [0.0, 1.0, 2.0,"),
        }),
    ],
    ids=["vllm", "sglang"],
)  # fmt: skip
def test_each_gemma4_script_fails_as_recorded_and_passes_where_the_sides_agree(
    tmp_path: Path, gemma4_companions: None, engine: str, spec: str, served: str, more: dict
) -> None:
    """One child per release with its companions: each recorded row's script fails saying what the engine serves
    for one frame ([0], 21 x 27 patches and 63 soft tokens, 0 s) and that the checkpoint refuses it; the first
    clips both take fail with the frame where they part; each claim's script on 32 frames passes (SGLang's times
    at 24 fps)."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)  # vLLM's loader path runs its pydantic and numba code
    agree = [{**r, "counterexample": AGREE} for r in RECORDED[engine]]
    if engine == "sglang":
        agree[2] = {**agree[2], "counterexample": AGREE_24}
    groups = {"recorded": RECORDED[engine], "more": MORE[engine], "agree": agree}
    messages = {
        "C16-recorded": (f"frames taken: {served} gives [0]; the checkpoint's Gemma4VideoProcessor {_ONE_REFUSED}",),
        "C17-recorded": (f"geometry: {served} gives {_GEOMETRY}{_ONE_REFUSED}",),
        "C18-recorded": (f"times (s): {served} gives [0.0]; the checkpoint's Gemma4VideoProcessor {_ONE_REFUSED}",),
        **more,
    }
    expect(outcomes(tmp_path, groups, engine, spec), messages)


@pytest.mark.slow
@pytest.mark.extra("video")  # the clips (PyAV), SGLang's decoder (decord)
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "message"),
    [
        ("vllm", "0.34.0", ("frames taken (read back) 32 [0, 3, 7, 11, 15, 19,", "!= the checkpoint's 32 [0, 3, 7, "
                            "11, 15, 18,", "the served side took what the trained side refuses: refused (ValueError: "
                            "When loading the video with num_frames=32, the requested number of frames exceeds "
                            "total_num_frames=3")),
        ("sglang", "0.5.23", ("the served side took what the trained side refuses: refused (ValueError: When loading "
                              "the video with num_frames=32, the requested number of frames exceeds total_num_frames=3",
                              "total_num_frames=1", "the served side refused what the trained side takes: refused "
                              "(DECORDError: ")),
    ],
    ids=["vllm", "sglang"],
)  # fmt: skip
def test_each_gemma4_c19_script_fails_on_its_kinds_and_passes_on_a_clip_both_take_whole(
    tmp_path: Path, gemma4_companions: None, engine: str, spec: str, message: tuple[str, ...]
) -> None:
    """C19's script makes the clips, hands their bytes to the engine's own loader (vLLM's fetch_video, SGLang's
    load_video and _video_decoder_to_tensor) and to transformers' load_video with the checkpoint's sampler: vLLM's
    linspace takes 19 where the checkpoint takes 18 (constant) and reads 'short', which the checkpoint refuses;
    SGLang reads 'short' and 'one', which the checkpoint refuses, and its decord refuses the rotation tag; each
    passes on 32 frames (both take every frame), SGLang's also on 'constant' (i x 120 // 32 on both sides)."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)
    alone = {**C19[engine], "evidence": "-"}  # no other kinds named
    groups = {"recorded": [C19[engine]], "agree": [{**alone, "counterexample": ["thirty-two", KIND["thirty-two"]]}]}
    if engine == "sglang":
        groups["constant"] = [{**alone, "counterexample": ["constant", KIND["constant"]]}]
    expect(outcomes(tmp_path, groups, engine, spec), {"C19-recorded": message})
