"""``deferlab versions``: release order and listing, policy matching, the versions baseline, the written matrix,
and one real release through the one runner.

The logic around the runs is checked on hand-made run records (`record`, a fake runner); the slow test runs
two claims of a cached real release through ``deferlab versions`` itself.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system import claims as registry
from deferlab.reference.system.systems import System, sorted_releases
from deferlab.reports.core import claims
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.versions import gate, matrix
from deferlab.reports.versions import render as versions_report


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict switch off unless a test turns it on (scripts/test.sh exports DEFERLAB_STRICT=1)."""
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def record(
    engine: str,
    version: str,
    verdicts: dict[str, str],
    *,
    evidence: dict[str, str] | None = None,
    sigs: dict[str, list[dict[str, Any]]] | None = None,
    error: str | None = None,
    counterexamples: dict[str, Any] | None = None,
) -> RunRecord:
    """A run's record as the runner reads it back (rows under the engine's label), without running anything."""
    system = System(engine, version)
    rows = []
    for c, v in verdicts.items():
        row = {"id": c, "policy": system.label, "verdict": v, "evidence": (evidence or {}).get(c, f"e {c}"),
               "counterexample": (counterexamples or {}).get(c, "x" if v == "fails" else None)}  # fmt: skip
        if c in (sigs or {}):
            row["signatures"] = sigs[c]
        rows.append(row)
    return RunRecord(system, "ci", rows=rows, rc=0, wrote=bool(rows), seconds=1.0, error=error)


def fake_runner(table: dict[tuple[str, str], RunRecord], ran: list | None = None) -> Any:
    """`reports.core.runner.run`'s stand-in: the record of the request's release, the claims it asked kept."""

    def run(request: Any, **kw: Any) -> RunRecord:
        key = (request.system.engine, str(request.system.spec))
        if ran is not None:
            ran.append((*key, request.claims, request.strict))
        got = table[key]
        keep = [r for r in got.rows if not request.claims or r["id"] in request.claims]
        return RunRecord(got.system, request.profile, rows=keep, rc=0, wrote=True, seconds=1.0, error=got.error)

    return run


def loads(system: System) -> str:
    return f"{system.engine}-{system.spec}"


def policy(name: str) -> dict[str, str]:
    return {cid: c.expected[name] for cid, c in registry.load_claims().items()}


def test_release_order_is_pep_440_and_the_index_listing_keeps_those_from_the_first() -> None:
    """0.5.6.post1 after 0.5.6, 0.5.10 after 0.5.9; the index listing keeps the releases from the engine's first
    release with the checked path, in that order."""
    assert sorted_releases(["0.5.10", "0.5.6.post1", "0.5.9", "0.5.6", "0.5.10.post1"]) == [
        "0.5.6", "0.5.6.post1", "0.5.9", "0.5.10", "0.5.10.post1"
    ]  # fmt: skip
    listing = "sglang (0.5.23)\nAvailable versions: 0.5.23, 0.5.18, 0.5.17.post1, 0.5.17, 0.5.16, 0.4.9\n"
    seen = []

    def fake(cmd: list[str], **kw: Any) -> tuple[int, str, str]:
        seen.append(cmd)
        return 0, listing, ""

    assert matrix.index_versions(capture=fake) == ["0.5.17", "0.5.17.post1", "0.5.18", "0.5.23"]
    assert seen[0][-3:-1] == ["versions", "sglang"]
    with pytest.raises(RuntimeError, match="cannot list sglang releases .*Could not find"):
        matrix.index_versions(capture=lambda cmd, **kw: (1, "", "ERROR: Could not find a version\n"))


def test_a_release_matches_the_policy_whose_expectations_it_reproduces() -> None:
    """A release giving RELEASED's verdicts matches RELEASED (and only policies with the very same vector)."""
    vectors = matrix.policy_vectors()
    got = matrix.policy_match(policy("RELEASED"), vectors)
    assert "RELEASED" in got["matches"] and got["differences"] == {}
    assert all(vectors[p] == vectors["RELEASED"] for p in got["matches"])


def test_a_release_matching_none_names_the_closest_and_the_differences() -> None:
    got = matrix.policy_match({**policy("RELEASED"), "C4": "fails"}, matrix.policy_vectors())
    assert got["matches"] == [] and got["closest"] == "RELEASED"
    assert got["differences"] == {"C4": {"release": "fails", "RELEASED": "holds"}}


def test_matrix_document_and_baseline_regressions(tmp_path: Path) -> None:
    """versions.json's keys; the baseline written is schema 2; a changed verdict is a regression; an update
    replaces the releases it ran and keeps the others."""
    runs = [record("sglang", "0.5.18", policy("INTERIM_3D3194F")), record("sglang", "0.5.23", policy("RELEASED")),
            record("sglang", "0.5.22", {}, error="boom")]  # fmt: skip
    doc = matrix.matrix(runs, "ci")
    assert doc["versions"] == ["0.5.18", "0.5.23"] and doc["errors"] == {"0.5.22": "boom"}
    assert doc["verdicts"]["C4"] == {"0.5.18": "fails", "0.5.23": "holds"}
    assert "INTERIM_3D3194F" in doc["policy_match"]["0.5.18"]["matches"]
    path = tmp_path / "versions_baseline.json"
    gate.save(path, gate.updated(None, doc))
    written = json.loads(path.read_text())
    assert written["schema_version"] == 2 and written["kind"] == "versions" and written["profile"] == "ci"
    assert list(written["cells"]) == ["0.5.18", "0.5.23"] and written["cells"]["0.5.18"]["C4"] == "fails"
    assert gate.compare(doc, gate.load(path), strict=True) == []
    changed = matrix.matrix([record("sglang", "0.5.23", {**policy("RELEASED"), "C7": "fails"})], "ci")
    assert gate.compare(changed, gate.load(path), strict=False) == [
        {"kind": "verdict", "name": "0.5.23/C7", "baseline": "holds", "current": "fails"}
    ]
    gate.save(path, gate.updated(gate.load(path), changed))  # replaces 0.5.23, keeps 0.5.18
    kept = gate.load(path)
    assert kept.cells["0.5.18"]["C4"] == "fails" and kept.cells["0.5.23"]["C7"] == "fails"


SCHEMA_1 = Path(__file__).parent / "versions_baseline_schema1.json"  # the baseline as committed before schema 2


def test_a_schema_1_baseline_is_read() -> None:
    """The versions baseline as committed before schema 2 (verdicts and some signature sets) loads as a versions
    baseline, releases in PEP 440 order, and the newest release compares clean against itself."""
    assert json.loads(SCHEMA_1.read_text())["schema_version"] == 1
    base = gate.load(SCHEMA_1)
    assert base.kind == "versions" and base.profile == "ci"
    assert "0.5.17" in base.cells and "vllm-0.33.0" in base.cells and base.signatures["0.5.23"]["C12"]
    row = base.cells["0.5.23"]
    sigs = {c: [{"signature": s} for s in base.signatures["0.5.23"].get(c, [])] for c in row}
    doc = matrix.matrix([record("sglang", "0.5.23", row, sigs=sigs)], "ci")
    assert gate.compare(doc, base, strict=True) == [] and doc["signature_notes"] == []


def test_a_new_signature_gates_only_under_the_strict_switch_and_ci(tmp_path: Path) -> None:
    a, b = "[RGBa] AssertionError: a", "[RGB] AssertionError: b"
    base_doc = matrix.matrix([record("sglang", "0.5.23", {"C12": "fails"}, sigs={"C12": [{"signature": a}]})], "ci")
    base = gate.updated(None, base_doc)
    now = matrix.matrix([record("sglang", "0.5.23", {"C12": "fails"}, sigs={"C12": [{"signature": b}]})], "ci")
    assert gate.compare(now, base, strict=True) == [
        {"kind": "signature", "name": "0.5.23/C12", "baseline": "fails", "current": f"fails in a new way: {b}"}
    ]
    assert now["signature_notes"] == [f"change: C12 on 0.5.23 no longer fails this way: {a}"]
    assert (
        gate.compare(now, base, strict=False) == []
        and "not gated: the strict switch is off" in (now["signature_notes"][0])
    )
    old = gate.updated(None, matrix.matrix([record("sglang", "0.5.23", {"C12": "fails"})], "ci"))
    old.signatures = {}  # a baseline written before it carried sets: verdicts only
    assert gate.compare(now, old, strict=True) == []


def test_a_failure_with_an_undocumented_signature_is_shown_failing_with_it_marked_new(tmp_path: Path) -> None:
    sig = [{"signature": "[LA] KeyError: 'backend'", "documented": False}]
    doc = matrix.matrix([record("sglang", "0.5.23", {"C12": "fails", "C1": "holds"}, sigs={"C12": sig})], "ci")
    assert doc["verdicts"]["C12"]["0.5.23"] == "fails"
    assert doc["new_signatures"] == {"0.5.23": {"C12": ["[LA] KeyError: 'backend'"]}}
    md = versions_report.markdown(doc, claims.load_claim_statements(), [])
    assert "| **FAILS** (crash) (new signature) |" in md and "## New failure signatures" in md  # a KeyError: crash
    assert "- **C12** on 0.5.23: `[LA] KeyError: 'backend'`" in md


def test_bad_baseline_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ValueError, match="is not a deferlab baseline"):
        gate.load(bad)
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"schema_version": 1, "claims": {"C1/RELEASED": "holds"}}))
    with pytest.raises(ValueError, match="is a report baseline; a versions baseline is needed here"):
        gate.load(report)


def test_written_matrix_has_markdown_json_and_grid(tmp_path: Path) -> None:
    runs = [record("sglang", "0.5.18", policy("INTERIM_3D3194F")), record("sglang", "0.5.23", policy("RELEASED"))]
    doc = matrix.matrix(runs, "dev")
    versions_report.write(tmp_path / "out", doc, claims.load_claim_statements(), [])
    md = (tmp_path / "out" / "versions.md").read_text()
    assert "| C4 |" in md and "0.5.18" in md and "INTERIM_3D3194F" in md and "RELEASED" in md
    assert json.loads((tmp_path / "out" / "versions.json").read_text())["versions"] == ["0.5.18", "0.5.23"]
    assert (tmp_path / "out" / "versions.png").read_bytes()[:4] == b"\x89PNG"


def test_versions_cli_refuses_bad_usage(capsys: pytest.CaptureFixture) -> None:
    """Bad versions arguments exit 2 before any download, naming what is accepted."""
    from deferlab.reports.cli import main

    for argv, said in (
        (["versions", "latest"], "VERSION must look like 0.5.23"),
        (["versions", "--newest", "0.5.23"], "--newest takes no VERSION"),
        (["versions", "--profile", "fast"], "--profile must be one of"),
        (["versions", "0.5.23", "--claims", "C99"], "--claims: 'C99' is no claim"),
        (
            ["versions", "--vllm", "0.33.0", "--claims", "C1"],
            "--claims: vLLM has no verdict for C1; accepted: C4, C13, C14, C15",
        ),
    ):
        assert main(argv) == 2
        assert said in capsys.readouterr().err


def test_claims_run_only_those_claims_and_the_strict_switch_reaches_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--claims C1,C2`` asks the runner for those (and the matrix lists only them); DEFERLAB_STRICT=1 sets the
    request's strict switch."""
    import argparse

    from deferlab.reports.versions import cli

    ran: list = []
    table = {("sglang", "0.5.23"): record("sglang", "0.5.23", policy("RELEASED"))}
    monkeypatch.setenv("DEFERLAB_STRICT", "1")
    args = argparse.Namespace(versions=["0.5.23"], vllm=None, newest=False, out=tmp_path / "m", profile="ci",
                              baseline="none", update_baseline=False, format=None, junit=None, claims="c2,C1")  # fmt: skip
    monkeypatch.setattr(cli, "refuse_unlisted", lambda wanted: None)
    assert cli.run(args, io.StringIO(), runner=fake_runner(table, ran), loader=loads) == 0
    assert ran == [("sglang", "0.5.23", ("C1", "C2"), True)]
    doc = json.loads((tmp_path / "m" / "versions.json").read_text())
    assert list(doc["verdicts"]) == ["C1", "C2"]


@pytest.mark.parametrize(("jobs", "cluster", "threads"), [(2, None, 1), (1, None, None), (2, "local", None)])
def test_releases_side_by_side_run_their_children_on_one_thread_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, cluster: str | None, threads: int | None
) -> None:
    """``--jobs`` above 1 on this machine: each release's child gets one torch / BLAS thread (as report and compare
    ask), so two children do not each spin a pool over both cores; one at a time, or on a cluster: the default."""
    import argparse

    from deferlab.reports.versions import cli

    asked: list = []
    table = {("sglang", "0.5.23"): record("sglang", "0.5.23", policy("RELEASED"))}
    inner = fake_runner(table)

    def runner(request: Any, **kw: Any) -> RunRecord:
        asked.append(request.threads)
        return inner(request, **kw)

    args = argparse.Namespace(versions=["0.5.23"], vllm=None, newest=False, out=tmp_path / "m", profile="ci",
                              baseline="none", update_baseline=False, format=None, junit=None, claims="C1",
                              jobs=jobs, cluster=None)  # fmt: skip
    monkeypatch.setattr(cli, "refuse_unlisted", lambda wanted: None)
    if cluster is not None:  # the cluster path is another executor: the requests it would submit, run here
        args.cluster = cluster
        monkeypatch.setattr(cli, "_run_tasks", lambda tasks, *a: {t.key: runner(t.request) for t in tasks})
    assert cli.run(args, io.StringIO(), runner=runner, loader=loads) == 0
    assert asked == [threads]


def test_the_suite_and_the_cli_read_one_registry() -> None:
    """The recorder's registry is reference.system.claims's, the CLI's claim ids are claims.toml's (in order), and
    both name real SGLang's column with the one label."""
    from deferlab.properties import verdicts
    from deferlab.reference.system.seam import SGLANG_LABEL, label_for
    from deferlab.reports.core.runner import suite_path

    assert verdicts.load_claims is registry.load_claims and verdicts.VERDICTS is registry.VERDICTS
    assert list(claims.load_claim_statements()) == list(registry.claim_ids()) == list(verdicts.load_claims())
    assert System("sglang", "0.5.23").label == SGLANG_LABEL == label_for("sglang")
    assert suite_path() == Path(verdicts.__file__).resolve().parent


@pytest.mark.slow
def test_one_real_release_through_the_runner(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``deferlab versions 0.5.23 --claims C1,C2``: loaded, run in a child, the two verdicts in the matrix; the
    committed baseline's cells for them compare clean (exit 0); no child is left."""
    from deferlab.reports.cli import main
    from deferlab.reports.core import process

    if not (Path.home() / ".cache" / "deferlab" / "sglang" / "0.5.23" / "sglang").is_dir():
        pytest.skip("sglang 0.5.23 is not cached")
    out = tmp_path / "v"
    rc = main(["versions", "0.5.23", "--claims", "C1,C2", "--out", str(out), "--profile", "dev"])
    err = capsys.readouterr().err
    assert rc == 0, err[-3000:]
    doc = json.loads((out / "versions.json").read_text())
    assert doc["versions"] == ["0.5.23"] and doc["errors"] == {}
    assert doc["verdicts"] == {"C1": {"0.5.23": "holds"}, "C2": {"0.5.23": "holds"}}
    assert doc["systems"]["0.5.23"]["name"] == "sglang-0.5.23" and doc["regressions"] == []
    assert "0.5.23: holds 2 in " in err and process.live() == []


def test_the_committed_baseline_has_every_familys_columns_on_the_newest_releases() -> None:
    """reports/versions_baseline.json (schema 2, written by ``scripts/versions.sh --newest --update-baseline``):
    the newest releases' family columns beside every older release's Kimi-K3 column."""
    base = gate.load(gate.BASELINE)
    assert base.kind == "versions" and "0.5.17" in base.cells
    assert base.cells["qwen3-vl:vllm-0.34.0"]["C4"] == "fails" and base.cells["internvl:0.5.23"]["C13"] == "fails"


def test_update_baseline_rewrites_the_schema_1_file_as_schema_2_keeping_the_releases_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--update-baseline`` on a copy of the committed schema-1 baseline: schema 2 written, 0.5.23's cells replaced
    (its new C7 failure and signature set), every other release kept as it was (0.5.22: verdicts, no set)."""
    import argparse

    from deferlab.reports.versions import cli

    path = tmp_path / "versions_baseline.json"
    path.write_text(SCHEMA_1.read_text())
    sigs = {"C7": [{"signature": "[x] AssertionError: new"}]}
    table = {("sglang", "0.5.23"): record("sglang", "0.5.23", {**policy("RELEASED"), "C7": "fails"}, sigs=sigs)}
    args = argparse.Namespace(versions=["0.5.23"], vllm=None, newest=False, out=tmp_path / "m", profile="ci",
                              baseline=str(path), update_baseline=True, format=None, junit=None)  # fmt: skip
    monkeypatch.setattr(cli, "refuse_unlisted", lambda wanted: None)
    log = io.StringIO()
    assert cli.run(args, log, runner=fake_runner(table), loader=loads) == 0  # updating: not gated
    assert "REGRESSION 0.5.23/C7: holds -> fails" in log.getvalue()
    old, new = json.loads(SCHEMA_1.read_text()), json.loads(path.read_text())
    assert new["schema_version"] == 2 and new["kind"] == "versions"
    assert new["cells"]["0.5.23"]["C7"] == "fails" and new["signatures"]["0.5.23"]["C7"] == ["[x] AssertionError: new"]
    assert {v: new["cells"][v] for v in old["verdicts"] if v != "0.5.23"} == {
        v: row for v, row in old["verdicts"].items() if v != "0.5.23"
    }
    assert "0.5.22" not in new["signatures"] and new["signatures"]["vllm-0.33.0"] == old["signatures"]["vllm-0.33.0"]
    assert gate.load(path).cells == new["cells"]
