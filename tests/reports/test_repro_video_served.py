"""The video reproducers where the engine computes the geometry or the times by a rule of its own (vLLM's C17 and C18,
SGLang's Qwen2.5-VL C18; `reports.repro.video_served_texts`, semantics §20.5-§20.6), and the engine-free reproducer
code (`reports.repro.video*`): each engine's part is found through its plugin, no engine name is tested there.

Why these rows: copied from ``reports/example/versions-newest`` (vLLM 0.34.0 and SGLang 0.5.23 under ``--model
qwen2.5-vl,qwen3-vl``); a reproducer must fail on its release with the difference predicted, and pass where the two
sides agree (so it can do both).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.engines import ENGINES
from deferlab.reports.repro import video
from tests.reports.test_repro import outcomes
from tests.reports.test_repro_video import AGREE, DEFAULTS, NUM_FRAMES_8, _written, clip, code, consts, row

REFUSED_1 = "the served side refused what the trained side takes (ZeroDivisionError: division by zero)"
TOOK_8 = ("the served side took what the trained side refuses (Refused: `num_frames` and `fps` are mutually exclusive "
          "arguments (ValueError in sample_frames: preprocess filled the processor's fps=2))")  # fmt: skip
VLLM_C17 = row("C17", "qwen2.5-vl:VLLM", f"AssertionError: [1@1 64x48; defaults] {REFUSED_1}", [clip(1, 1.0), DEFAULTS])
VLLM_Q3_C17 = row("C17", "qwen3-vl:VLLM", f"AssertionError: [2@1 64x48; num_frames=8] {TOOK_8}",
                  [clip(2, 1.0), NUM_FRAMES_8])  # fmt: skip
VLLM_C18 = {**VLLM_C17, "id": "C18"}
VLLM_Q3_C18 = {**VLLM_Q3_C17, "id": "C18"}
SGLANG_Q25_C18 = row("C18", "qwen2.5-vl:SGLANG", "AssertionError: [1@1 64x48; defaults] the served side refused what "
                     "the trained side takes (Refused: SGLang refused 1@1 with {}: ValueError: nframes should in "
                     "interval [2, 1], but got 0.)", [clip(1, 1.0), DEFAULTS])  # fmt: skip
PIXELS = DEFAULTS.replace("min_pixels=None", "min_pixels=50176").replace("max_pixels=None", "max_pixels=200704")


@pytest.mark.parametrize(
    ("r", "want"),
    [
        (VLLM_C17, {"FRAMES": 1, "MEDIA_IO_KWARGS": {}, "INFO": ("vllm.model_executor.models.qwen2_5_vl",
                                                                 "Qwen2_5_VLProcessingInfo")}),
        (VLLM_Q3_C18, {"FRAMES": 2, "MEDIA_IO_KWARGS": {"num_frames": 8},
                       "INFO": ("vllm.model_executor.models.qwen3_vl", "Qwen3VLProcessingInfo")}),
        (SGLANG_Q25_C18, {"FRAMES": 1, "SERVER_VIDEO_CONFIG": {}, "PROCESSOR": "Qwen2VLVideoProcessor"}),
    ],
    ids=["vllm-C17", "vllm-C18-qwen3", "sglang-C18-qwen2.5"],
)  # fmt: skip
def test_the_new_cells_become_scripts_stating_their_counterexample(r: dict, want: dict) -> None:
    text = code(r)
    assert text is not None, r
    assert {k: consts(text).get(k) for k in want} == want
    assert "$" not in text and f"def test_{r['id'].lower()}_" in text and "def _served_" in text


def test_each_engines_part_is_found_through_its_plugin() -> None:
    """The module beside each plugin's video module (`EngineFacts.video`), named repro_video; none for a name the
    registry does not know."""
    for name, facts in ENGINES.items():
        part = video.engine_part(name)
        assert part is not None and part.__name__ == facts.video.rpartition(".")[0] + ".repro_video", name
        assert set(part.FAMILIES) <= {"C16", "C17", "C18", "C19"} and part.SERVED and part.LOADER
    assert video.engine_part("no-such-engine") is None


def test_no_reproducer_module_of_the_video_claims_tests_an_engines_name() -> None:
    """The per-engine part is each engine's data: reports/repro/video*.py compare no string with an engine's name."""
    folder = Path(video.__file__).parent
    found = []
    for path in sorted(folder.glob("video*.py")) + [folder / "bytes_texts.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [n.value for n in [node.left, *node.comparators] if isinstance(n, ast.Constant)]
                found += [f"{path.name}:{node.lineno}: {v!r}" for v in names if v in ENGINES]
    assert not found, found


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts' trained side
@pytest.mark.parametrize(
    ("engine", "spec", "rows", "messages"),
    [
        ("vllm", "0.34.0", [VLLM_C17, VLLM_Q3_C17, VLLM_C18, VLLM_Q3_C18], {
            "C17-qwen2.5-recorded": "(grid, padded) refused (ZeroDivisionError: division by zero) != the checkpoint's "
                                    "([1, 4, 4], 1)",
            "C17-qwen3-recorded": "(grid, padded) ([1, 4, 4], 0) != the checkpoint's refused (ValueError: `num_frames` "
                                  "and `fps` are mutually exclusive",
            "C18-qwen2.5-recorded": "times refused (ZeroDivisionError: division by zero) != [0.0]",
            "C18-qwen3-recorded": "times [0.5] != refused (ValueError: `num_frames` and `fps` are mutually exclusive",
            "C17-qwen2.5-more": "(grid, padded) ([1, 14, 20], 0) != the checkpoint's ([2, 14, 20], 1)",
            "C18-qwen2.5-more": "1 times [0.0] != the checkpoint's 2 [0.0, 2.0]"}),
        ("sglang", "0.5.23", [SGLANG_Q25_C18], {
            "C18-qwen2.5-recorded": "times refused (ValueError: nframes should in interval [2, 1], but got 0.) != [0.0]",
            "C18-qwen2.5-agree": "times [0.0, 0.08333333333333333] != [0.0, 1.0]"}),
    ],
    ids=["vllm", "sglang"],
)  # fmt: skip
def test_a_reproducer_fails_on_its_release_as_predicted_and_passes_where_the_sides_agree(
    tmp_path: Path, engine: str, spec: str, rows: list[dict], messages: dict[str, str]
) -> None:
    """vLLM: the recorded rows fail as recorded (its loader refuses a one-frame clip the checkpoint takes; it
    ignores num_frames, which the checkpoint refuses beside its default fps); 3 frames at 1 fps under min/max pixels
    (vLLM's own size aliases), it takes 2 frames where the checkpoint takes all 3; on 4 frames at 2 fps, and
    Qwen3-VL under min/max pixels, the sides agree (semantics §20.6). SGLang's Qwen2.5-VL tells the model 1/12 s
    per grid step on every clip (no metadata handed over, §20.5), so its script fails on the agreeing clip too."""
    from deferlab.reference.system import extras

    if engine == "vllm" and (missing := extras.why_missing("vllm")) is not None:
        pytest.skip(missing)  # vLLM's loader path runs its ModelConfig (pydantic) and numba kernels
    groups: dict[str, list[dict[str, Any]]] = {
        "recorded": rows, "agree": [{**r, "counterexample": AGREE[r["id"]]} for r in rows]}  # fmt: skip
    if engine == "vllm":
        three = [clip(3, 1.0), PIXELS]
        groups["more"] = [{**VLLM_C17, "counterexample": three}, {**VLLM_C18, "counterexample": three}]
        groups["alsoagree"] = [{**r, "counterexample": [clip(4, 2.0), PIXELS]} for r in (VLLM_Q3_C17, VLLM_Q3_C18)]
    got = outcomes(_written(tmp_path, groups, engine, spec), spec, tmp_path, engine=engine)
    by = {"-".join(n.split("-")[:2] + [n.rsplit("-", 1)[1][:-3]]): m for n, m in got.items()}  # C17-qwen3-more
    assert {k for k, v in by.items() if v != "passed"} == set(messages), by
    for key, message in messages.items():
        assert message in by[key], (key, by[key])
