"""``deferlab compare``: the verdict diff, exit statuses, the written files, and a refusal before any work.

The tests run the command on fake run records (a fake load check and a fake
runner in place of `reports.core.runner`'s, `compare_support`); what a side is
and how it loads (PATH@REV extracted aside, the engine, real releases) is
`test_compare_sides`'s.
"""

from __future__ import annotations

import io
import json
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import System
from deferlab.reports.compare import cli as compare
from deferlab.reports.compare import render as compare_render
from deferlab.reports.core import diff as core_diff
from deferlab.reports.core.runner import LoadError, Request, RunRecord, command
from tests.reports.compare_support import BASE, FAILS, compare_args, fake_loader, fake_rows, fake_runner


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict switch off unless a test turns it on (scripts/test.sh exports DEFERLAB_STRICT=1)."""
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def _run(tmp: Path, sides: dict[str, Any], *, error: str | None = None, **kw: Any) -> tuple[int, str]:
    log = io.StringIO()
    rc = compare.run(compare_args(tmp, **kw), log, runner=fake_runner(sides, error), loader=fake_loader)
    return rc, log.getvalue()


@pytest.mark.parametrize(
    ("base", "head", "sigs", "want"),
    [
        ("holds", "fails", (None, "s"), "newly failing"),
        ("holds-with-caveat", "fails", (None, "s"), "newly failing"),
        ("n/a", "fails", (None, "s"), "newly failing"),  # a feature that arrives broken
        ("fails", "holds", ("s", None), "newly holding"),
        ("fails", "n/a", ("s", None), "newly holding"),
        ("fails", "fails", ("s", "t"), "failing differently"),
        ("fails", "fails", ("s", "s"), "unchanged"),
        ("holds", "holds", (None, None), "unchanged"),
        ("holds", "n/a", (None, None), "changed"),
        ("not-run", "fails", (None, "s"), "changed"),  # BASE never checked it: not a new failure
        ("fails", "not-run", ("s", None), "changed"),
    ],
)
def test_change_of_each_pair_of_verdicts(base: str, head: str, sigs: tuple, want: str) -> None:
    """The one comparison's kinds (`reports.core.diff`), as compare reads them."""
    cells = [core_diff.Cell(v, frozenset({s}) if s else frozenset()) for v, s in zip((base, head), sigs, strict=True)]
    assert core_diff.kind_of(*cells) == want


def test_a_newly_failing_claim_exits_1_with_heads_counterexample_in_every_output(tmp_path: Path) -> None:
    """C4 holds -> fails: exit 1; compare.md/json/png/xml and both logs are written; the XML notes the change."""
    head = {**BASE, "C4": "fails", "C9": "holds", "C3": "fails"}
    rc, log = _run(tmp_path, {"0.5.21": fake_rows(BASE), "0.5.22": fake_rows(head)})
    assert rc == 1 and "NEWLY FAILING C4: holds -> fails" in log
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "compare.json",
        "compare.md",
        "compare.png",
        "compare.xml",
        "logs",
        "repro",
    ]
    doc = json.loads((out / "compare.json").read_text())
    made = doc["reproducers"]  # C3's failure fits its template; C4's fixture failure is not the owner-grid one
    assert made["written"] == ["repro/C3-sglang-0.5.21.py", "repro/C3-sglang-0.5.22.py"]
    why = f"no reproducer template fits this failure ({FAILS[9:]})"  # under 120 characters: not cut
    assert made["missing"] == [f"C9 on sglang-0.5.21: {why}", f"C4 on sglang-0.5.22: {why}"]  # C9 has no template
    assert f"no reproducer: {made['missing'][1]}" in log
    assert doc["changes"]["newly failing"] == ["C4"] and doc["changes"]["newly holding"] == ["C9"]
    assert doc["failures"]["newly failing"][0]["where"] == ["HEAD sglang-0.5.22"]
    assert doc["failures"]["still failing"][0]["where"] == ["BASE sglang-0.5.21", "HEAD sglang-0.5.22"]  # C3 once
    assert next(c for c in doc["claims"] if c["id"] == "C4")["head_counterexample"] == [[0.5] * 3, [0.5] * 3]
    md = (out / "compare.md").read_text()
    assert md.index("## Newly failing") < md.index("**C4**") < md.index("## Failing differently")
    assert re.search(
        r"^\| C4 \| Deferred output is .* \| holds \| \*\*FAILS\*\* \| \*\*newly failing\*\* \|$", md, re.M
    )
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    case = ET.parse(out / "compare.xml").getroot().find("testsuite/testcase[@name='C4 statement C4']")
    assert case.get("classname") == "deferlab.sglang-0.5.22"
    assert case.find("failure").get("message").startswith("newly failing (BASE holds): AssertionError: 205")


def test_failing_differently_and_newly_holding_exit_0(tmp_path: Path) -> None:
    """C3 fails on both with a new signature, C9 is fixed: reported, exit 0 (nothing newly broken)."""
    other = {"C3": "AssertionError: the eager formula is not computed in float32 at all"}
    rc, _ = _run(tmp_path, {"0.5.21": fake_rows(BASE), "0.5.22": fake_rows({**BASE, "C9": "holds"}, other)})
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert rc == 0 and doc["changes"]["failing differently"] == ["C3"] and doc["changes"]["newly holding"] == ["C9"]
    groups = doc["failures"]["failing differently"]
    assert [g["where"] for g in groups] == [["BASE sglang-0.5.21"], ["HEAD sglang-0.5.22"]]


def test_a_side_that_could_not_run_its_claims_exits_3_and_says_why(tmp_path: Path) -> None:
    """HEAD recorded nothing: exit 3, the reason in compare.md and compare.json, nothing called newly failing."""
    why = "the claim tests recorded nothing (pytest exit 4): no results file"
    rc, log = _run(tmp_path, {"0.5.21": fake_rows(BASE), "0.5.22": None}, error=why)
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert rc == 3 and doc["sides_not_run"] == ["HEAD"] and doc["errors"] == {"HEAD": why}
    assert doc["changes"]["newly failing"] == [] and f"HEAD could not run its claims: {why}" in log
    assert why in (tmp_path / "out" / "compare.md").read_text()


def test_stdout_formats_junit_file_and_the_ci_job_summary(tmp_path: Path, monkeypatch, capsys) -> None:
    """--format json prints compare.json; --junit writes the XML there; $GITHUB_STEP_SUMMARY gets the summary."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = compare_args(tmp_path)
    args.format, args.junit = "json", tmp_path / "ci" / "claims.xml"
    rc = compare.run(
        args,
        io.StringIO(),
        runner=fake_runner({"0.5.21": fake_rows(BASE), "0.5.22": fake_rows(BASE)}),
        loader=fake_loader,
    )
    assert rc == 0 and json.loads(capsys.readouterr().out)["changes"]["unchanged"]
    assert ET.parse(args.junit).getroot().get("failures") == "2"  # C3 and C9 fail on HEAD
    text = summary.read_text()
    assert text.startswith("# Claims, BASE -> HEAD: `0.5.21` -> `0.5.22`") and "| C3 |" in text
    assert "<details>" not in text  # the one-screen part only


def test_an_interrupted_compare_leaves_no_partial_output(tmp_path: Path) -> None:
    """Ctrl-C while the sides run, or a failure while writing: no output folder, no staging folder left."""

    def interrupted(*a: Any, **kw: Any) -> RunRecord:
        raise KeyboardInterrupt

    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        compare.run(compare_args(tmp_path), log, runner=interrupted, loader=fake_loader)
    assert list(tmp_path.iterdir()) == []
    sides = {"0.5.21": fake_rows(BASE), "0.5.22": fake_rows(BASE)}

    def broken_png(doc: dict, path: Path) -> Path:
        path.write_bytes(b"half a fig")
        raise OSError("disk full")

    mp = pytest.MonkeyPatch()
    mp.setattr(compare_render, "png", broken_png)
    try:
        with pytest.raises(OSError, match="disk full"):
            compare.run(compare_args(tmp_path), log, runner=fake_runner(sides), loader=fake_loader)
    finally:
        mp.undo()
    assert list(tmp_path.iterdir()) == []


def test_both_sides_are_loaded_before_anything_runs_and_a_failure_names_the_side(tmp_path: Path) -> None:
    """HEAD cannot be loaded: UsageError naming HEAD and the driver's line; the claims never ran."""

    def loader(system: System) -> str:
        if system.spec == "0.5.22":
            raise LoadError("sglang source '0.5.22': could not fetch the wheel; accepted: ...")
        return fake_loader(system)

    def never(*a: Any, **kw: Any) -> RunRecord:
        raise AssertionError("a side ran although HEAD could not be loaded")

    with pytest.raises(UsageError, match=r"^HEAD: sglang source '0\.5\.22': could not fetch the wheel"):
        compare.run(compare_args(tmp_path), io.StringIO(), runner=never, loader=loader)
    assert not (tmp_path / "out").exists()


def test_a_new_signature_in_a_failing_claim_is_failing_differently_and_a_vanished_one_is_not() -> None:
    """Rows carrying signature sets: HEAD with a signature BASE lacks fails differently (listed); HEAD losing one
    of BASE's signatures alone is unchanged."""

    def row(sigs: list[str]) -> dict[str, Any]:
        return {"id": "C12", "verdict": "fails", "evidence": FAILS, "signatures": [{"signature": x} for x in sigs]}

    (got,) = compare_render.diff([row(["[RGBa] a"])], [row(["[RGBa] a", "[LA] b"])], {"C12": {"statement": "s"}})
    assert got["change"] == "failing differently" and got["new_signatures"] == ["[LA] b"]
    (got,) = compare_render.diff([row(["[RGBa] a", "[LA] b"])], [row(["[RGBa] a"])], {"C12": {"statement": "s"}})
    assert got["change"] == "unchanged" and got["new_signatures"] == []


@pytest.mark.parametrize(("strict", "profile", "want"), [(False, "ci", 0), (True, "ci", 1), (True, "dev", 0)])
def test_failing_differently_gates_only_under_the_strict_switch_and_ci(
    tmp_path: Path, strict: bool, profile: str, want: int
) -> None:
    """A claim failing differently exits 1 only with --strict and the derandomized profile; an undocumented
    signature on HEAD is marked new in the table."""
    other = {"C3": "AssertionError: the eager formula is not computed in float32 at all"}
    head = fake_rows(BASE, other)
    head[1]["signatures"] = [{"signature": "[x] AssertionError: new", "documented": False}]  # C3
    args = compare_args(tmp_path, strict=strict)
    args.profile = profile
    log = io.StringIO()
    rc = compare.run(args, log, runner=fake_runner({"0.5.21": fake_rows(BASE), "0.5.22": head}), loader=fake_loader)
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert rc == want and doc["changes"]["failing differently"] == ["C3"] and doc["strict"] is strict
    assert ("FAILING DIFFERENTLY (strict) C3" in log.getvalue()) is bool(want)
    assert (
        "| **FAILS** | **FAILS** (new signature) | **failing differently** |"
        in (tmp_path / "out" / "compare.md").read_text()
    )


def test_claims_narrows_both_sides_and_the_table_and_an_unknown_id_is_refused(tmp_path: Path) -> None:
    seen: list[tuple[str, ...]] = []
    inner = fake_runner({"0.5.21": fake_rows({"C4": "holds", "C9": "fails"}), "0.5.22": fake_rows({"C4": "fails"})})

    def runner(request: Request, **kw: Any) -> RunRecord:
        seen.append(request.claims)
        return inner(request, **kw)

    rc = compare.run(compare_args(tmp_path, claims="c4"), io.StringIO(), runner=runner, loader=fake_loader)
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert rc == 1 and seen == [("C4",), ("C4",)] and [c["id"] for c in doc["claims"]] == ["C4"]
    with pytest.raises(UsageError, match=r"^--claims: 'C99' is no claim; accepted: comma-separated ids among C1, "):
        compare.check_args(compare_args(tmp_path, claims="C4,C99"))
    cmd = command(Request(System("sglang", "0.5.23"), claims=("C4", "C12")))
    assert cmd[cmd.index("-k") + 1] == "test_claim_c4_ or test_claim_c12_"


def test_a_side_that_is_no_spec_is_refused_at_once_before_anything_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A missing path, a word, an empty revision: one line naming the side, exit 2, in well under 2 s (it used to
    take 17 s: the side was loaded to find out); the load check is never called."""
    from deferlab.reports.cli import build_parser, main
    from deferlab.reports.core import runner

    def never(*a: Any, **kw: Any) -> str:
        raise AssertionError("loaded although the SPEC is no accepted form")

    monkeypatch.setattr(runner, "check_loads", never)
    build_parser()  # the imports every command pays once, before the clock starts
    for argv, said in (
        (["compare", "/nonexistent/sglang", "0.5.23"], r"BASE: sglang source '/nonexistent/sglang': no such path; "),
        (["compare", "0.5.23", "latest"], r"HEAD: sglang source 'latest': neither 'installed', an existing path, a "),
        (["compare", "0.32.0", "~/no/vllm", "--engine", "vllm"], r"HEAD: vllm source '~/no/vllm': no such path; "
         r"accepted: a release such as 0\.33\.0, 'installed', a vLLM checkout path, or PATH@REV"),
    ):  # fmt: skip
        t0 = time.perf_counter()
        assert main([*argv, "--out", str(tmp_path / "c")]) == 2
        seconds = time.perf_counter() - t0
        err = capsys.readouterr().err
        assert re.search(said, err) and err.count("\n") == 1, err
        assert seconds < 2.0, seconds
    assert not (tmp_path / "c").exists()
