"""C19's reproducers (`reports.repro.video_pixels`, semantics §20.2-§20.3): fitted from rows recorded by real runs,
their clips made in the script equal to the claim's, and run against the cached releases.

Why these rows: each is a run of ``properties/claims/test_video.py -k c19`` (vLLM 0.34.0 and LMDeploy 0.18.0 as
``reports/example/versions-newest`` holds them; SGLang 0.5.23 with the video extra's decord, 2026-12-06), the
counterexample's kind and the other failing kinds its evidence names. In the engine's process the claim's trained
side is deferlab's restatement; the script's is transformers' own ``load_video`` at the release's pin, which agrees
with the engine on some kinds the restatement does not (vLLM's Qwen3-VL ``vfr``, ``short``, ``one``: semantics
§20.6): those cases pass, the rest fail with the difference predicted.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deferlab.properties import clips
from deferlab.reference.oracle.video import encode_index, read_index
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import video, video_pixels
from deferlab.reports.repro import video_pixels_texts as texts
from deferlab.reports.repro.families import Column
from tests.reports.test_repro import run_cases
from tests.reports.test_repro_video import consts

CACHE = Path(os.path.expanduser("~/.cache/deferlab"))
LABEL = {"sglang": "SGLANG", "vllm": "VLLM", "lmdeploy": "LMDEPLOY"}


def kind(name: str) -> list[str]:
    return [name, repr(clips.KINDS[name])]


def row(engine: str, family: str, first: str, *also: str) -> dict[str, Any]:
    """A failing C19 row as a run records it: the first kind its counterexample, the others in its evidence."""
    evidence = "9 generated clip kinds, each side's own loader AssertionError: [..]"
    evidence += "".join(f" also {kind(k)!r}: AssertionError: [{k}; defaults] ...;" for k in also)
    return {"id": "C19", "policy": f"{family}:{LABEL[engine]}", "verdict": "fails", "statement": "-",
            "evidence": evidence, "counterexample": kind(first), "provenance": {}}  # fmt: skip


EVERY = ("ntsc", "vfr", "short", "one", "long", "odd", "rotation90", "webm")
VLLM_Q25 = row("vllm", "qwen2.5-vl", "constant", *(k for k in EVERY if k != "long"))
VLLM_Q3 = row("vllm", "qwen3-vl", "vfr", "short", "one", "rotation90")
LMDEPLOY_Q3 = row("lmdeploy", "qwen3-vl", "constant", *EVERY)
SGLANG_Q25 = row("sglang", "qwen2.5-vl", "constant", *(k for k in EVERY if k != "long"))
SGLANG_Q3 = row("sglang", "qwen3-vl", "vfr", "short", "rotation90", "webm")


def render(r: dict[str, Any]) -> str | None:
    engine = {v: k for k, v in LABEL.items()}[r["policy"].split(":")[1].split()[0]]
    made = video.render("C19", r["counterexample"], "", Column.of(r, engine), r)
    return None if made is None else made[0]


def test_a_recorded_row_states_its_kinds_first_the_counterexamples() -> None:
    text = render(VLLM_Q3)
    assert text is not None and "$" not in text
    ns = consts(text)
    assert list(ns["KINDS"]) == ["vfr", "short", "one", "rotation90"]
    assert ns["KINDS"]["vfr"]["vfr_seed"] == int(clips.KINDS["vfr"].key()[:8], 16)
    assert ns["KINDS"]["rotation90"]["rotation"] == 90 and "vfr_seed" not in ns["KINDS"]["rotation90"]
    assert "deferlab" not in "".join(line for line in text.splitlines() if line.startswith(("import", "from")))
    assert "MEDIA_IO_KWARGS = {}" in text and "def test_c19_" in text


@pytest.mark.parametrize(
    ("r", "why"),
    [
        ({**VLLM_Q3, "policy": "internvl:VLLM"}, "a family with no video path"),
        ({**LMDEPLOY_Q3, "policy": "qwen2.5-vl:LMDEPLOY"}, "LMDeploy serves no Qwen2.5-VL video"),
        ({**VLLM_Q3, "policy": "qwen3-vl:VLLM host-normalized"}, "a served path that is not the default"),
        ({**VLLM_Q3, "counterexample": ["constant", "ClipSpec(frames=0, fps=30.0)"]}, "not a recorded spec"),
        ({**VLLM_Q3, "counterexample": ["JPEG EXIF 2", 17, 11, 0]}, "C20's counterexample"),
    ],
)
def test_rows_that_are_not_its_get_no_file(r: dict, why: str) -> None:
    assert render(r) is None, why


@pytest.mark.extra("video")  # PyAV makes both clips
def test_the_scripts_clip_is_the_claims_clip_for_every_kind() -> None:
    """The script's clip (`properties.clips`' encoder and `reference.oracle.video`'s index code, restated) decodes
    to the claim's: the same frame count, timestamps, rate, rotation and, frame by frame, the same index read back
    by both readers. (Bytes are not compared: libx264's and libvpx's threads make some kinds' bytes differ from
    run to run.)"""
    import av

    ns: dict[str, Any] = {}
    exec(compile("import io\nfrom fractions import Fraction\nimport av\nimport numpy as np\n" + texts._INDEX_CODE,  # noqa: S102
                 "<repro clip>", "exec"), ns)  # fmt: skip
    for h, w, i in ((48, 64, 0), (47, 63, 16), (16, 16, 65535)):
        frame = ns["_index_frame"](h, w, i)
        assert np.array_equal(frame, encode_index(h, w, i)) and ns["_read_index"](frame) == read_index(frame) == i

    def decoded(data: bytes) -> tuple[Any, ...]:
        with av.open(io.BytesIO(data)) as c:
            s = c.streams.video[0]
            frames = list(c.decode(video=0))
            return (float(s.average_rate or 0), [f.pts for f in frames], frames[0].rotation,
                    [read_index(f.to_ndarray(format="rgb24")) for f in frames])  # fmt: skip

    for name, spec in clips.KINDS.items():
        if not clips.codec_available(spec):
            continue
        clip = video_pixels.kinds_of(kind(name), None)[name]
        assert decoded(ns["_make_clip"](clip)) == decoded(clips.encode(spec)), name


def _run(tmp: Path, engine: str, spec: str, rows: list[dict[str, Any]]) -> dict[str, str]:
    """``<family>[<kind>]`` -> "passed" or the failure's first line, from one child process that loads the cached
    release and its companions with deferlab's loader (`reports.repro.cli.run_files`)."""
    if not (CACHE / engine / spec).is_dir():
        pytest.skip(f"{engine} {spec} not in {CACHE}")
    system = {"name": f"{engine}-{spec}", "engine": engine, "kind": "wheel", "version": spec, "commit": None}
    paths = []
    for r in rows:  # written as `deferlab repro` writes a file: its header, then the script
        code, what, _ = video.render("C19", r["counterexample"], "", Column.of(r, engine), r)
        family = r["policy"].split(":")[0]
        paths.append(tmp / f"C19-{family}-{engine}-{spec}.py")
        paths[-1].write_text(repro.header(r, system, spec, "a test", what, engine) + code, encoding="utf-8")
    got = {}
    for case in run_cases(paths, spec, tmp / "results.xml", engine)[0]:
        family = case.get("classname").split("C19-")[1].split(f"-{engine}")[0]
        failure = case.find("failure")
        message = "passed" if failure is None else failure.get("message", "").splitlines()[0]
        got[f"{family}[{case.get('name').rsplit('[', 1)[1]}"] = message
    return got


ROT = "a served frame's index cannot be read back: refused (ValueError: unreadable index frame 48x64: check bits 0000"
WEBM = "the served side took what the trained side refuses: refused (IndexError: index -1 is out of bounds"
TAKES_ALL = "!= the checkpoint's 120 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ..., 116, 117, 118, 119]"
DECORD = "the served side refused what the trained side takes: refused (DECORDError: "


@pytest.mark.slow
@pytest.mark.extra("video")  # the clips (PyAV), SGLang's decoder (decord)
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "rows", "messages"),
    [
        ("vllm", "0.34.0", [VLLM_Q25, VLLM_Q3], {
            "qwen2.5-vl[constant]": "frames taken (read back) 8 [0, 15, 30, 45, 60, 75, 90, 105] " + TAKES_ALL,
            "qwen2.5-vl[ntsc]": "frames taken (read back) 8 [0, 15, 30, 45, 60, 75, 90, 105] " + TAKES_ALL,
            "qwen2.5-vl[vfr]": "frames taken (read back) 6 [0, 20, 40, 60, 80, 100] " + TAKES_ALL,
            "qwen2.5-vl[short]": "frames taken (read back) 2 [0, 1] != the checkpoint's 3 [0, 1, 2]",
            "qwen2.5-vl[one]": "the served side refused what the trained side takes: refused (ZeroDivisionError",
            "qwen2.5-vl[odd]": "frames taken (read back) 8 [0, 15, 30, 45, 60, 75, 90, 105] " + TAKES_ALL,
            "qwen2.5-vl[rotation90]": ROT, "qwen2.5-vl[webm]": WEBM, "qwen3-vl[rotation90]": ROT}),
        ("lmdeploy", "0.18.0", [LMDEPLOY_Q3], {
            "qwen3-vl[constant]": "frames taken (read back) 32 [0, 3, 7, 11, 15, 19, 23, 26, 30, 34, 38, 42, ..., 107, "
                                  "111, 115, 119] != the checkpoint's 8 [0, 17, 34, 51, 68, 85, 102, 119]",
            "qwen3-vl[ntsc]": "!= the checkpoint's 8 [0, 17, 34, 51, 68, 85, 102, 119]",
            "qwen3-vl[vfr]": "!= the checkpoint's 7 [0, 20, 40, 60, 79, 99, 119]",
            "qwen3-vl[long]": "frames taken (read back) 32 [0, 9, 19, 29, 39, 49, 59, 69, 79, 89, 99, 109, ..., 279, "
                              "289, 299, 309] != the checkpoint's 310",
            "qwen3-vl[odd]": "!= the checkpoint's 8 [0, 17, 34, 51, 68, 85, 102, 119]",
            "qwen3-vl[rotation90]": ROT, "qwen3-vl[webm]": WEBM}),
        ("sglang", "0.5.23", [SGLANG_Q25, SGLANG_Q3], {
            "qwen2.5-vl[constant]": "frames taken (read back) 8 [0, 17, 34, 51, 68, 85, 102, 119] " + TAKES_ALL,
            "qwen2.5-vl[ntsc]": "frames taken (read back) 8 [0, 17, 34, 51, 68, 85, 102, 119] " + TAKES_ALL,
            "qwen2.5-vl[vfr]": "frames taken (read back) 6 [0, 23, 47, 71, 95, 119] " + TAKES_ALL,
            "qwen2.5-vl[short]": "frames taken (read back) 2 [0, 2] != the checkpoint's 3 [0, 1, 2]",
            "qwen2.5-vl[one]": "the served side refused what the trained side takes: refused (ValueError: nframes "
                               "should in interval [2, 1], but got 0.)",
            "qwen2.5-vl[odd]": "frames taken (read back) 8 [0, 17, 34, 51, 68, 85, 102, 119] " + TAKES_ALL,
            "qwen2.5-vl[rotation90]": DECORD, "qwen2.5-vl[webm]": WEBM,
            "qwen3-vl[vfr]": "frames taken (read back) 6 [0, 23, 47, 71, 95, 119] != the checkpoint's 7 [0, 20, 40, "
                             "60, 79, 99, 119]",
            "qwen3-vl[short]": "frames taken (read back) 2 [0, 2] != the checkpoint's 3 [0, 1, 2]",
            "qwen3-vl[rotation90]": DECORD, "qwen3-vl[webm]": WEBM}),
    ],
    ids=["vllm", "lmdeploy", "sglang"],
)  # fmt: skip
def test_a_c19_reproducer_fails_on_its_release_where_the_frames_differ(
    tmp_path: Path, engine: str, spec: str, rows: list[dict], messages: dict[str, str]
) -> None:
    """Each recorded kind's case fails on the cached release with the frames (read back from the pixels) or the
    refusal predicted (semantics §20.5-§20.7: vLLM's and SGLang's 2 fps sample against every frame, LMDeploy's 32,
    OpenCV turning a rotated clip, decord refusing it, transformers' PyAV reader refusing the WebM clip whose
    frame count it reads as 0); the kinds where the engine's loader and transformers' agree pass (vLLM's Qwen3-VL
    ``vfr``, ``short``, ``one``; LMDeploy's ``short``, ``one``). One child process per engine."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)  # vLLM's media connector imports its config machinery (pydantic)
    got = _run(tmp_path, engine, spec, rows)
    assert {k for k, v in got.items() if v != "passed"} == set(messages), got
    for key, message in messages.items():
        assert message in got[key], (key, got[key])
