"""``deferlab versions`` for CI and reviewers: versions.md's summary and grouped failures, versions.json's
``failure_groups``, ``--format md|json|junit`` on stdout, ``--junit FILE`` and ``$GITHUB_STEP_SUMMARY``.

Hand-made run records through a fake runner (`test_versions.fake_runner`): no engine is fetched or run.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system import claims as registry
from deferlab.reference.system.systems import REQUEST_CLAIMS, engine
from deferlab.reports.core import claims
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.versions import cli as versions_cli
from deferlab.reports.versions import matrix as versions
from deferlab.reports.versions import render as versions_report
from tests.reports.test_versions import fake_runner, loads, record

SGLANG = ["0.5.21", "0.5.22", "0.5.23"]
C3_EVIDENCE = "AssertionError: " + " ".join(f"level{i:04d}" for i in range(200))  # about 2,000 characters
C3_CE = "[[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]"


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict switch off unless a test turns it on (scripts/test.sh exports DEFERLAB_STRICT=1)."""
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def _failures(version: str) -> dict[str, tuple[str, str]]:
    """claim -> (evidence, counterexample) of each failing claim of an SGLang release of the fixture."""
    out = {"C3": (C3_EVIDENCE, C3_CE)}  # one flaw, on every release
    if version == "0.5.22":
        out["C12"] = ("AssertionError: RGBa: a fully transparent pixel is not background", "RGBa 1x1")
    if version == "0.5.23":
        out["C12"] = ("KeyError: 'backend'", "RGB 2x1")  # the same claim failing another way
    return out


def _run(engine_name: str, version: str) -> RunRecord:
    if engine_name == "vllm":
        verdicts = {"C4": "holds", "C13": "holds", "C14": "fails", "C15": "holds"}
        fails = {"C14": ("AssertionError: [RGB] 6x2: 1 of 24 values unexplained", "RGB 6x2")}
    else:
        fails = _failures(version)
        verdicts = {c: "fails" if c in fails else "holds" for c in registry.load_claims()}
        if version == "0.5.23":
            del verdicts["C9"]  # recorded nothing: not-run
    evidence = {c: fails.get(c, ("ok", None))[0] for c in verdicts}
    counterexamples = {c: fails.get(c, ("", None))[1] for c in verdicts}
    return record(engine_name, version, verdicts, evidence=evidence, counterexamples=counterexamples)


def _doc() -> dict[str, Any]:
    return versions.matrix([*(_run("sglang", v) for v in SGLANG), _run("vllm", "0.33.0")], "ci")


def _args(**kw: Any) -> argparse.Namespace:
    base = {"versions": list(SGLANG), "vllm": ["0.33.0"], "newest": False, "out": None, "profile": "ci"}
    return argparse.Namespace(
        **{**base, "baseline": "none", "update_baseline": False, "format": None, "junit": None, **kw}
    )


@pytest.fixture
def fake_releases(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """`reports.core.runner`'s run and load check replaced by the fixture's records; what ran, in order."""
    from deferlab.reports.core import runner

    ran: list[tuple] = []
    table = {(e, v): _run(e, v) for e, v in [*(("sglang", v) for v in SGLANG), ("vllm", "0.33.0")]}
    monkeypatch.setattr(runner, "run", fake_runner(table, ran))
    monkeypatch.setattr(runner, "check_loads", loads)
    monkeypatch.setattr(versions_cli, "refuse_unlisted", lambda wanted: None)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return ran


def _entries(md: str) -> list[str]:
    section = md[md.index("## Failing claims") : md.index("## What ran")]
    return [x for x in section.splitlines() if re.match(r"- \*\*C\d+\*\*", x)]


def test_one_entry_per_distinct_failure_listing_every_release() -> None:
    """C3's one flaw on three releases is one entry naming all three; C12's two signatures are two entries."""
    md = versions_report.markdown(_doc(), claims.load_claim_statements(), [])
    entries = _entries(md)
    c3 = [e for e in entries if e.startswith("- **C3**")]
    assert len(c3) == 1 and all(f"`{v}`" in c3[0] for v in SGLANG)
    c12 = [e for e in entries if e.startswith("- **C12**")]
    assert len(c12) == 2 and "`0.5.22`" in c12[0] and "KeyError" in c12[1] and "`0.5.23`" in c12[1]
    assert [e for e in entries if e.startswith("- **C14**")][0].count("vllm-0.33.0") == 1
    assert md.count(C3_EVIDENCE) == 1  # in full, once, in a <details> block
    blocks = re.findall(r"<details>(.*?)</details>", md, re.S)
    assert any(C3_EVIDENCE in b and C3_CE in b for b in blocks)


def test_no_cut_without_its_full_text_in_a_details_block() -> None:
    """Every line holding a cut ("…") has the text it cut, whole, in a <details> block."""
    md = versions_report.markdown(_doc(), claims.load_claim_statements(), [])
    blocks = ["\n".join(x.strip() for x in b.splitlines()) for b in re.findall(r"<details>(.*?)</details>", md, re.S)]
    cut = [x for x in md.splitlines() if "…" in x and "<details>" not in x]
    assert cut, "the fixture must make the renderer cut something"
    for line in cut:
        for frag in re.findall(r"([^`(|]{12,})…", line):
            frag = frag.strip()[-40:]
            assert any(frag in b and not b.rstrip().endswith(frag) for b in blocks), (line[:120], frag)
    assert "level0199" in md  # the 2,000-character evidence reaches its end somewhere


def test_the_summary_is_on_top_and_short() -> None:
    """Title, then the releases run, the failing claims by release count, the baseline line; <= 25 lines before
    the verdict table."""
    regs = [{"kind": "verdict", "name": "0.5.23/C12", "baseline": "holds", "current": "fails"}]
    md = versions_report.markdown(_doc(), claims.load_claim_statements(), regs, baseline="vb.json")
    lines = md.splitlines()
    top = lines[: next(i for i, x in enumerate(lines) if x.startswith("| claim |"))]
    assert top[0].startswith("# Claim verdicts across engine releases") and top[2] == "## Summary"
    assert len(top) <= 25, len(top)
    text = "\n".join(top)
    assert "Releases run (4): 0.5.21, 0.5.22, 0.5.23, vllm-0.33.0" in text
    failing = [x.strip() for x in top if re.match(r"\s+- \*\*C\d+\*\*", x)]
    assert [x.split("**")[1] for x in failing] == ["C3", "C12", "C14"]  # most releases first
    # each with the classes of its failing cells (semantics §21): C3 states FP32 counts only, float32-only
    assert "fails on 3 of 4 (float32-only 3): 0.5.21, 0.5.22, 0.5.23" in failing[0] and "fails on 2 of 4" in failing[1]
    assert "**1 regression(s)** against `vb.json` (exit 1): `0.5.23/C12` holds -> fails" in text
    quiet = versions_report.markdown(_doc(), claims.load_claim_statements(), [], baseline="vb.json")
    assert "nothing changed against the baseline `vb.json`" in quiet
    assert "no baseline compared" in versions_report.markdown(_doc(), claims.load_claim_statements(), [])


def test_format_json_is_versions_json_and_junit_counts(
    tmp_path: Path, fake_releases: list, capsys: pytest.CaptureFixture
) -> None:
    """--format json prints versions.json (with failure_groups); --junit FILE holds one testcase per (claim,
    release): fails as failures with the counterexample, n/a and not-run as skipped."""
    out, xml = tmp_path / "m", tmp_path / "ci" / "versions.xml"
    assert versions_cli.run(_args(out=out, format="json", junit=xml), log=io.StringIO()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((out / "versions.json").read_text())
    assert [(g["claim"], g["where"]) for g in printed["failure_groups"]] == [
        ("C3", SGLANG),
        ("C12", ["0.5.22"]),
        ("C12", ["0.5.23"]),
        ("C14", ["vllm-0.33.0"]),
    ]
    assert printed["failure_groups"][0]["evidence"] == C3_EVIDENCE
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    n_claims = len(registry.load_claims())
    # the n/a cells, every column Kimi-K3's: the claims vLLM does not answer, and on every column the
    # requests-as-sent claims, which are asked of the other families (semantics §20)
    answered = {c for c in engine("vllm").claims or () if c not in REQUEST_CLAIMS}
    na = (n_claims - len(answered)) + 3 * len(REQUEST_CLAIMS)
    assert {k: suite.get(k) for k in ("tests", "failures", "skipped", "errors")} == {
        "tests": str(4 * n_claims),
        "failures": "6",
        "skipped": str(na + 1),
        "errors": "0",
    }
    cases = {(c.get("classname"), c.get("name").split()[0]): c for c in suite.iter("testcase")}
    failure = cases[("deferlab.0.5.22", "C3")].find("failure")
    assert failure is not None and C3_CE in (failure.text or "") and C3_EVIDENCE in (failure.text or "")
    assert cases[("deferlab.0.5.23", "C9")].find("skipped") is not None  # not-run: never a pass
    assert xml.read_bytes() == (out / "versions.xml").read_bytes()


def test_format_md_and_junit_print_the_written_files(
    tmp_path: Path, fake_releases: list, capsys: pytest.CaptureFixture
) -> None:
    for fmt, name in (("md", "versions.md"), ("junit", "versions.xml")):
        out = tmp_path / fmt
        assert versions_cli.run(_args(out=out, format=fmt), log=io.StringIO()) == 0
        assert capsys.readouterr().out == (out / name).read_text()
    ET.fromstring((tmp_path / "junit" / "versions.xml").read_bytes())  # parses


def test_without_format_stdout_stays_as_it_was(
    tmp_path: Path, fake_releases: list, capsys: pytest.CaptureFixture
) -> None:
    """No --format: nothing on stdout (progress is on the log), as before the flag existed."""
    assert versions_cli.run(_args(out=tmp_path / "m"), log=io.StringIO()) == 0
    assert capsys.readouterr().out == ""


def test_step_summary_is_appended_when_set(
    tmp_path: Path, fake_releases: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$GITHUB_STEP_SUMMARY gets the summary and the verdict table, after what earlier steps wrote."""
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    baseline = tmp_path / "vb.json"
    baseline.write_text(json.dumps({"schema_version": 1, "profile": "ci", "verdicts": {"0.5.23": {"C5": "fails"}}}))
    # a schema-1 file: still read
    log = io.StringIO()
    assert versions_cli.run(_args(out=tmp_path / "m", baseline=str(baseline)), log=log) == 1  # C5 changed
    text = step.read_text()
    assert text.startswith("earlier step\n# Claim verdicts across engine releases")
    assert "## Summary" in text and "| C3 |" in text and "`0.5.23/C5` fails -> holds" in text
    assert "## Failing claims" not in text  # the one-screen part only
    assert "summary appended to $GITHUB_STEP_SUMMARY" in log.getvalue()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"format": "html"}, r"--format must be one of 'md', 'json', 'junit', 'families'; got 'html'"),
        ({"junit": "DIR"}, r"--junit: '.*' is a directory; accepted: a file path for the XML"),
    ],
)
def test_bad_values_are_refused_before_any_release_runs(
    kw: dict, match: str, tmp_path: Path, fake_releases: list
) -> None:
    from deferlab.reference.system.errors import UsageError

    kw = {k: (tmp_path if v == "DIR" else v) for k, v in kw.items()}
    with pytest.raises(UsageError, match=match):
        versions_cli.run(_args(out=tmp_path / "m", **kw), log=io.StringIO())
    assert fake_releases == [] and not (tmp_path / "m").exists()


def test_jobs_runs_releases_at_once_and_the_matrix_keeps_release_order(
    tmp_path: Path, fake_releases: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--jobs 2: two releases' runs overlap (each waits at a barrier the other must reach: one after the other
    would time out there) and versions.json is the one --jobs 1 writes, columns in release order."""
    import threading

    from deferlab.reports.core import runner

    one = tmp_path / "one"
    assert versions_cli.run(_args(out=one, jobs=1), log=io.StringIO()) == 0
    sequential = runner.run
    meet = threading.Barrier(2, timeout=20)

    def overlapping(request: Any, **kw: Any) -> RunRecord:
        if str(request.system.spec) in ("0.5.21", "0.5.22"):  # the first two tasks start together
            meet.wait()
        return sequential(request, **kw)

    monkeypatch.setattr(runner, "run", overlapping)
    two = tmp_path / "two"
    assert versions_cli.run(_args(out=two, jobs=2), log=io.StringIO()) == 0
    first, second = (json.loads((d / "versions.json").read_text()) for d in (one, two))
    for doc in (first, second):
        doc.pop("generated", None)
    assert list(second["columns"]) == list(first["columns"]) == ["0.5.21", "0.5.22", "0.5.23", "vllm-0.33.0"]
    assert second == first
