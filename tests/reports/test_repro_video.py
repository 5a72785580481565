"""The video and decoded-bytes reproducers (`reports.repro.video`, semantics §20): fitted from rows recorded by real
runs of the claims, refused for rows that are not theirs, and run against the cached releases.

Why these rows: each is copied from a run of ``properties/claims/test_video.py`` and ``test_bytes.py`` (LMDeploy
0.18.0 and SGLang 0.5.23 under ``--model qwen3-vl``, vLLM 0.34.0 under ``--model qwen2.5-vl``; 2026-12-06); a
reproducer must fail on its release with the difference the row recorded, and pass when handed a counterexample
the two sides agree on (so it can do both). The bytes the C20 script makes must be the claim's own
(`properties.strategies.encoded`), checked engine-free for every class.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deferlab.properties.strategies import encoded
from deferlab.reports.repro import bytes_texts, video
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro.templates import render
from tests.reports.test_repro import outcomes

CACHE = Path(os.path.expanduser("~/.cache/deferlab"))
DEFAULTS = "VideoRequest(fps=None, num_frames=None, min_pixels=None, max_pixels=None, total_pixels=None)"


def clip(frames: int, fps: float) -> str:
    return f"Clip(frames={frames}, fps={fps!r}, width=64, height=48)"


def row(cid: str, policy: str, failure: str, ce: Any) -> dict[str, Any]:
    """A failing row as a run records it (the failure is the evidence's last AssertionError)."""
    return {"id": cid, "policy": policy, "verdict": "fails", "statement": "-", "evidence": failure,
            "counterexample": ce, "provenance": {}}  # fmt: skip


# Recorded (the first differing point of each sweep, as the verdict rows hold them).
LMDEPLOY_C16 = row("C16", "qwen3-vl:LMDEPLOY", "AssertionError: [5@5 64x48; defaults] frames taken differ from the "
                   "trained side's: index 2: 2 != 3", [clip(5, 5.0), DEFAULTS])  # fmt: skip
LMDEPLOY_C18 = row("C18", "qwen3-vl:LMDEPLOY", "AssertionError: [5@5 64x48; defaults] times differ from the trained "
                   "side's: 3 times != 2", [clip(5, 5.0), DEFAULTS])  # fmt: skip
LMDEPLOY_C17 = row("C17", "qwen3-vl:LMDEPLOY", "AssertionError: [5@5 64x48; defaults] geometry differs from the "
                   "trained side's: padded 1 != 0", [clip(5, 5.0), DEFAULTS])  # fmt: skip
LMDEPLOY_C20 = row("C20", "qwen3-vl:LMDEPLOY", "AssertionError: [JPEG EXIF 2 17x11; data-uri] LMDEPLOY: 176 of 187 "
                   "pixels differ (first at (0, 0): served [42, 41, 10], trained [50, 26, 42]); [JPEG EXIF 2 17x11; "
                   "file] LMDEPLOY: 176 of 187 pixels differ (first at (0, 0): served [42, 41, 10], trained [50, 26, "
                   "42])", ["JPEG EXIF 2", 17, 11, 0])  # fmt: skip
SGLANG_C17 = row("C17", "qwen3-vl:SGLANG", "AssertionError: [2@1 64x48; defaults] geometry differs from the "
                 "trained side's: size (384, 288) != (64, 64)", [clip(2, 1.0), DEFAULTS])  # fmt: skip
MIN_PIXELS = DEFAULTS.replace("min_pixels=None", "min_pixels=50176")
LMDEPLOY_C17_PIXELS = {**LMDEPLOY_C17, "counterexample": [clip(5, 5.0), MIN_PIXELS]}  # semantics §20.7's worked case
VLLM_C16 = row("C16", "qwen2.5-vl:VLLM", "AssertionError: [1@1 64x48; defaults] the served side refused what the "
               "trained side takes (Refused: ZeroDivisionError: division by zero)", [clip(1, 1.0), DEFAULTS])  # fmt: skip
NUM_FRAMES_8 = DEFAULTS.replace("num_frames=None", "num_frames=8")
VLLM_Q3_C16 = row("C16", "qwen3-vl:VLLM", "AssertionError: [2@1 64x48; num_frames=8] the served side took what the "
                  "trained side refuses (Refused: `num_frames` and `fps` are mutually exclusive arguments (ValueError "
                  "in sample_frames: preprocess filled the processor's fps=2))", [clip(2, 1.0), NUM_FRAMES_8])  # fmt: skip
VLLM_C20 = row("C20", "qwen2.5-vl:VLLM", "AssertionError: [P PNG tRNS 17x11; data-uri] VLLM: 31 of 187 pixels differ "
               "(first at (5, 6): served [205, 238, 159], trained [155, 221, 64]); [P PNG tRNS 17x11; file] VLLM: 31 "
               "of 187 pixels differ", ["P PNG tRNS", 17, 11, 0])  # fmt: skip
SGLANG_C16 = row("C16", "qwen3-vl:SGLANG", "AssertionError: [3@1 64x48; defaults] frames taken differ from the "
                 "trained side's: index 1: 2 != 1", [clip(3, 1.0), DEFAULTS])  # fmt: skip
SGLANG_C18 = row("C18", "qwen3-vl:SGLANG", "AssertionError: [3@1 64x48; defaults] times differ from the trained "
                 "side's: 1 times != 2", [clip(3, 1.0), DEFAULTS])  # fmt: skip
SGLANG_C20 = row("C20", "qwen3-vl:SGLANG", "AssertionError: [JPEG EXIF 2 17x11; data-uri] SGLANG: 176 of 187 pixels "
                 "differ (first at (0, 0): served [42, 41, 10], trained [50, 26, 42])", ["JPEG EXIF 2", 17, 11, 0])  # fmt: skip
# Counterexamples the two sides agree on (semantics §20.4-§20.7: 4 frames at 2 fps are taken whole by every side
# here; a plain RGB PNG decodes the same everywhere).
AGREE = {
    "C16": [clip(4, 2.0), DEFAULTS],
    "C17": [clip(4, 2.0), DEFAULTS],
    "C18": [clip(4, 2.0), DEFAULTS],
    "C20": ["RGB PNG", 17, 11, 0],
}
ENGINE = {"LMDEPLOY": "lmdeploy", "VLLM": "vllm", "SGLANG": "sglang"}


def engine_of(r: dict[str, Any]) -> str:
    return ENGINE[r["policy"].split(":")[1].split()[0]]


def code(r: dict[str, Any]) -> str | None:
    made = render(r["id"], r["counterexample"], r["evidence"], engine=engine_of(r), row=r)
    return None if made is None else made[0]


def consts(text: str) -> dict[str, Any]:
    """The module-level constants a reproducer states."""
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def imports(text: str) -> set[str]:
    tree = ast.parse(text)
    found = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return found | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


@pytest.mark.parametrize(
    ("r", "want"),
    [
        (LMDEPLOY_C16, {"FRAMES": 5, "FPS": 5.0, "WIDTH": 64, "HEIGHT": 48, "OPTIONS": {}}),
        (LMDEPLOY_C18, {"FRAMES": 5, "FPS": 5.0, "PROCESSOR": "Qwen3VLVideoProcessor"}),
        (VLLM_C16, {"FRAMES": 1, "FPS": 1.0, "PROCESSOR": "Qwen2VLVideoProcessor", "MEDIA_IO_KWARGS": {}}),
        (SGLANG_C16, {"FRAMES": 3, "FPS": 1.0, "SERVER_VIDEO_CONFIG": {}}),
        (VLLM_Q3_C16, {"FRAMES": 2, "PROCESSOR": "Qwen3VLVideoProcessor", "MEDIA_IO_KWARGS": {"num_frames": 8}}),
        (SGLANG_C18, {"FRAMES": 3, "FPS": 1.0}),
        (SGLANG_C17, {"FRAMES": 2, "FPS": 1.0, "PROCESSOR": "Qwen3VLVideoProcessor"}),
        (LMDEPLOY_C17_PIXELS, {"FRAMES": 5, "OPTIONS": {"min_pixels": 50176}}),
        (LMDEPLOY_C20, {"CLS": "JPEG EXIF 2", "WIDTH": 17, "HEIGHT": 11, "SEED": 0, "KIND": "file"}),
        (VLLM_C20, {"CLS": "P PNG tRNS", "KIND": "file", "MEDIA_TYPE": "image/png", "SUFFIX": ".png"}),
        (SGLANG_C20, {"CLS": "JPEG EXIF 2", "KIND": "data-uri", "SUFFIX": ".jpg"}),
        ({**SGLANG_C20, "policy": "kimi-k3:SGLANG"}, {"CLS": "JPEG EXIF 2"}),  # the default family's column too
    ],
    ids=lambda v: f"{v['id']}-{v['policy']}" if isinstance(v, dict) and "id" in v else "",
)
def test_a_recorded_row_becomes_a_standalone_script_stating_its_counterexample(r: dict, want: dict) -> None:
    text = code(r)
    assert text is not None, r
    got = consts(text)
    assert {k: got.get(k) for k in want} == want
    assert "$" not in text, "a placeholder left unfilled"
    found = imports(text)
    assert not any("deferlab" in m for m in found), found
    assert any(m.split(".")[0] == engine_of(r) for m in found), found
    assert f"def test_{r['id'].lower()}_" in text


def test_the_options_of_a_request_reach_each_engine_under_its_own_names() -> None:
    request = "VideoRequest(fps=1.0, num_frames=None, min_pixels=50176, max_pixels=None, total_pixels=None)"
    ce = [clip(283, 24.0), request]
    assert video.parse_case(ce) == ({"frames": 283, "fps": 24.0, "width": 64, "height": 48},
                                    {"fps": 1.0, "min_pixels": 50176})  # fmt: skip
    sgl = consts(code({**SGLANG_C16, "counterexample": ce}) or "")
    assert sgl["SERVER_VIDEO_CONFIG"] == {"fps": 1.0, "min_pixels": 50176}
    num = [clip(2, 1.0), request.replace("fps=1.0", "fps=None").replace("num_frames=None", "num_frames=8")]
    assert consts(code({**SGLANG_C16, "counterexample": num}) or "")["SERVER_VIDEO_CONFIG"]["nframes"] == 8
    assert consts(code({**VLLM_C16, "counterexample": num}) or "")["MEDIA_IO_KWARGS"] == {"num_frames": 8}


@pytest.mark.parametrize(
    ("r", "why"),
    [
        ({**VLLM_C16, "id": "C17", "policy": "internvl:VLLM"}, "a family with no video path"),
        ({**LMDEPLOY_C16, "id": "C18", "policy": "qwen2.5-vl:LMDEPLOY"}, "LMDeploy serves no Qwen2.5-VL video"),
        ({**LMDEPLOY_C16, "policy": "qwen3-vl:LMDEPLOY host-normalized"}, "a served path that is not the default"),
        ({**LMDEPLOY_C16, "counterexample": ["JPEG EXIF 2", 17, 11, 0]}, "not a clip and request"),
        (
            {**LMDEPLOY_C16, "counterexample": [clip(5, 5.0), DEFAULTS.replace("total_pixels=None", "total_pixels=9")]},
            "total_pixels: no option of the engine",
        ),
        ({**LMDEPLOY_C20, "counterexample": ["BMP", 17, 11, 0]}, "a class the script cannot make"),
        ({**LMDEPLOY_C20, "counterexample": [clip(5, 5.0), DEFAULTS]}, "C20's row with a clip"),
        ({**LMDEPLOY_C16, "id": "C19"}, "C19's counterexample is a clip kind, not a clip and request"),
    ],
)
def test_rows_that_are_not_a_templates_get_no_file(r: dict, why: str) -> None:
    assert code(r) is None, why


@pytest.mark.extra("transformers")  # the script's imports name transformers' load_image
def test_the_scripts_bytes_are_the_claims_bytes_for_every_class() -> None:
    """The C20 script's ``_make_bytes`` (a restatement: a reproducer imports nothing of deferlab) makes the very
    bytes `properties.strategies.encoded` made for the claim, every class, two sizes and seeds."""
    ns: dict[str, Any] = {}
    exec(compile(bytes_texts.BYTES_IMPORTS + bytes_texts._MAKE_BYTES, "<repro bytes>", "exec"), ns)  # noqa: S102
    for cls in encoded.ENCODED_CLASSES:
        for w, h, seed in ((17, 11, 0), (23, 14, 77)):
            assert ns["_make_bytes"](cls, w, h, seed) == encoded.make_bytes(cls, w, h, seed), (cls, w, h, seed)
    assert np.array_equal(ns["_alpha"](9, 4, 3), encoded._alpha(9, 4, 3))


def test_deferlab_repro_writes_them_with_a_header_naming_the_companions(tmp_path: Path) -> None:
    system = {"name": "lmdeploy-0.18.0", "engine": "lmdeploy", "kind": "wheel", "version": "0.18.0", "commit": None}
    rows = [LMDEPLOY_C16, {**LMDEPLOY_C16, "id": "C19"}, LMDEPLOY_C20]
    written, missing = repro.write_reproducers(rows, system, "0.18.0", tmp_path, source="a test", engine="lmdeploy")
    assert sorted(p.name for p in written) == ["C16-qwen3-vl-lmdeploy-0.18.0.py", "C20-qwen3-vl-lmdeploy-0.18.0.py"]
    assert len(missing) == 1 and missing[0].startswith("C19 on "), missing
    info = repro.read_header(written[0])
    assert (info["claim"], info["engine"], info["family"]) == ("C16", "lmdeploy", "qwen3-vl")
    assert info["companions"] == "transformers,torchvision"


def _written(tmp: Path, groups: dict[str, list[dict]], engine: str, spec: str) -> list[Path]:
    """The reproducers of each group of rows (tag -> rows), renamed ``<file>-<tag>.py`` into one folder (one child
    process runs them all)."""
    if not (CACHE / engine / spec).is_dir():
        pytest.skip(f"{engine} {spec} not in {CACHE}")
    system = {"name": f"{engine}-{spec}", "engine": engine, "kind": "wheel", "version": spec, "commit": None}
    out: list[Path] = []
    for tag, rows in groups.items():
        written, missing = repro.write_reproducers(rows, system, spec, tmp / tag, source="a test", engine=engine)
        assert len(written) == len(rows), missing
        out += [p.rename(tmp / f"{p.stem}-{tag}.py") for p in written]
    return out


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "rows", "messages"),
    [
        ("lmdeploy", "0.18.0", [LMDEPLOY_C16, LMDEPLOY_C17, LMDEPLOY_C18, LMDEPLOY_C20], {
            "C16-recorded": "frames taken [0, 1, 2, 3, 4, 4] != the checkpoint's [0, 1, 3, 4]",
            "C17-recorded": "(grid, padded) ([3, 4, 4], 1) != the checkpoint's ([2, 4, 4], 0)",
            "C17-more": "(grid, padded) ([3, 6, 8], 1) != the checkpoint's ([2, 8, 10], 0)",
            "C20-more": "the served side took what the trained side refuses: refused (OSError: image file is "
                          "truncated",
            "C18-recorded": "3 times [0.1, 0.5, 0.8] != the checkpoint's 2 [0.1, 0.7",
            "C20-recorded": "176 of 187 pixels differ (first at (0, 0): served [42, 41, 10], trained [50, 26, 42])"}),
        ("vllm", "0.34.0", [VLLM_C16, VLLM_C20], {
            "C16-recorded": "frames taken refused (ZeroDivisionError: division by zero) != the checkpoint's [0, 0]",
            "C20-recorded": "31 of 187 pixels differ (first at (5, 6): served [205, 238, 159], trained [155, 221, 64])",
            "C16-more": "frames taken [0, 1] != the checkpoint's refused (ValueError: `num_frames` and `fps` are "
                        "mutually exclusive"}),
        ("sglang", "0.5.23", [SGLANG_C16, SGLANG_C17, SGLANG_C18, SGLANG_C20], {
            "C20-recorded": "176 of 187 pixels differ (first at (0, 0): served [42, 41, 10], trained [50, 26, 42])",
            "C16-recorded": "frames taken [0, 2] != the checkpoint's [0, 1, 2, 2]",
            "C17-recorded": "(grid, padded) ([1, 18, 24], 0) != the checkpoint's ([1, 4, 4], 0)",
            "C17-agree": "(grid, padded) ([2, 18, 24], 0) != the checkpoint's ([2, 4, 4], 0)",
            "C16-more": "frames taken [0, 2] != the checkpoint's [0, 1, 2, 2]",
            "C18-recorded": "1 times [1.0] != the checkpoint's 2 [0.5, 2.0]"}),
    ],
    ids=["lmdeploy", "vllm", "sglang"],
)  # fmt: skip
def test_a_reproducer_fails_on_its_release_as_recorded_and_passes_where_the_sides_agree(
    tmp_path: Path, engine: str, spec: str, rows: list[dict], messages: dict[str, str]
) -> None:
    """Each recorded row's script fails on the cached release with the difference the claim recorded (the indices,
    times and geometry of the row's figure and failure, C20's first differing pixel; LMDeploy's C17 under
    min_pixels, semantics §20.7's 128x96 against 160x128; its C20 on a truncated JPEG, which LMDeploy's
    LOAD_TRUNCATED_IMAGES lets through, §20.8); the same script on an agreeing counterexample passes,
    except SGLang's C17, which differs on every clip (§20.5: its own pre-resize). One child process per engine,
    the release and its companions loaded by deferlab's loader."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)  # vLLM's loader path runs its ModelConfig (pydantic) and numba kernels
    groups = {"recorded": rows, "agree": [{**r, "counterexample": AGREE[r["id"]]} for r in rows]}
    if engine == "lmdeploy":
        groups["more"] = [LMDEPLOY_C17_PIXELS, {**LMDEPLOY_C20, "counterexample": ["truncated JPEG", 17, 11, 0]}]
    if engine == "vllm":  # Qwen3-VL: the loader ignores num_frames, the processor resamples; TRAINED refuses it
        groups["more"] = [VLLM_Q3_C16]
        groups["alsoagree"] = [{**VLLM_Q3_C16, "counterexample": AGREE["C16"]}]
    if engine == "sglang":  # Qwen2.5-VL's processor samples nothing: every frame (semantics §20.5, 3@1)
        groups["more"] = [{**SGLANG_C16, "policy": "qwen2.5-vl:SGLANG"}]
    got = outcomes(_written(tmp_path, groups, engine, spec), spec, tmp_path, engine=engine)
    by = {f"{n.split('-')[0]}-{n.rsplit('-', 1)[1][:-3]}": message for n, message in got.items()}
    assert {k for k, v in by.items() if v != "passed"} == set(messages), by
    for key, message in messages.items():
        assert message in by[key], (key, by[key])
