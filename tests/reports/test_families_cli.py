"""``deferlab families``: every family of the registry, each engine's paths and ranges, the default marked."""

from __future__ import annotations

import json

import pytest

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.systems import ENGINES
from deferlab.reports.cli import main


def test_json_is_the_registry_family_by_family(capsys: pytest.CaptureFixture) -> None:
    assert main(["families", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [f["name"] for f in found] == list(FAMILIES)
    for f in found:
        family = FAMILIES[f["name"]]
        assert f["claims"] == list(family.claims) and f["scope"] == family.scope
        served = [(e, p["releases"], p["path"], p["default"]) for e, ps in f["engines"].items() for p in ps]
        want = [(s.engine, f"{s.low}-{s.high}" if s.high else f"{s.low}+", s.path, s.default) for s in family.served]
        assert sorted(served) == sorted(want)
    assert [f["name"] for f in found if f["default"]] == ["kimi-k3"]


def test_the_table_has_a_row_per_family_and_a_column_per_engine(capsys: pytest.CaptureFixture) -> None:
    assert main(["families"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split("|")[1:-1]
    assert [h.strip() for h in head[-len(ENGINES) :]] == [e.display for e in ENGINES.values()]
    rows = [line for line in lines[2:] if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == list(FAMILIES)
    gemma = next(r for r in rows if r.startswith("| `gemma4`")).split("|")[-1 - len(ENGINES) : -1]
    cells = dict(zip(ENGINES, gemma, strict=True))
    assert "0.5.17+ served *" in cells["sglang"] and "0.34.0+ device-normalized *" in cells["vllm"]
    assert "not checked" in cells["lmdeploy"]
    internvl = dict(zip(ENGINES, next(r for r in rows if r.startswith("| `internvl`")).split("|")[-1 - len(ENGINES) : -1],
                        strict=True))  # fmt: skip
    assert "0.14.0+ served *" in internvl["lmdeploy"]  # a path the LMDeploy plugin declares itself


def test_a_family_whose_trained_side_needs_a_missing_extra_is_refused_at_the_front_door(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Qwen's trained side is transformers' own class (the transformers extra): without it, every command that takes
    --model refuses a Qwen family in one line naming the extra, before anything loads; Kimi-K3 needs nothing."""
    from deferlab.reference.system import extras

    line = "needs the optional extra 'transformers' (transformers not installed; for ...)"
    monkeypatch.setattr(extras, "why_missing", lambda e: line if e == "transformers" else None)
    for argv in (
        ["versions", "0.5.23", "--model", "qwen3-vl"],
        ["compare", "0.5.22", "0.5.23", "--model", "all"],
        ["report", "--vllm", "0.34.0", "--model", "kimi-k3,qwen2.5-vl"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "its trained side needs the optional extra 'transformers'" in err[0], err
    from deferlab.reports.core.sides import require_extras

    assert require_extras(("kimi-k3", "internvl", "gemma3")) == ("kimi-k3", "internvl", "gemma3")


def test_a_path_that_does_not_answer_a_claim_of_its_family_says_so(capsys: pytest.CaptureFixture) -> None:
    """GLM-4.1V is judged in full (C13, C14) on SGLang's path; vLLM's ships its pixels raw and answers neither: its
    cell says ``(n/a C13, C14)`` and its JSON claims leave both out, SGLang's keep them. A family whose scope has no
    C13 (Gemma 4) says nothing of it on the same kind of path."""
    assert main(["families", "--format", "json"]) == 0
    glm = next(f for f in json.loads(capsys.readouterr().out) if f["name"] == "glm-4.1v")
    video = ["C16", "C17", "C18", "C19"]  # its checkpoint names a video processor (semantics §20.4)
    assert glm["engines"]["vllm"][0]["claims"] == ["C4", "C15", *video, "C20"]
    assert glm["engines"]["sglang"][0]["claims"] == glm["claims"] == ["C4", "C13", "C14", "C15", *video, "C20"]
    assert main(["families"]) == 0
    rows = {r.split("`")[1]: r for r in capsys.readouterr().out.splitlines() if r.startswith("| `")}
    assert "0.32.0+ device-normalized * (n/a C13, C14)" in rows["glm-4.1v"]
    assert "(n/a" not in rows["gemma4"] and "(n/a" not in rows["qwen3-vl"]
