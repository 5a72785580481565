"""``deferlab versions``: release listing, policy matching, the versions baseline, the written matrix.

The subprocess runs on real SGLang are exercised by CI's ``deferlab versions
--newest``; here the logic around them is checked on hand-made runs, so a
wrong match or a missed regression fails fast.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from deferlab.reference.system import claims as registry
from deferlab.reports.report import claims
from deferlab.reports.versions import matrix as versions
from deferlab.reports.versions import render as versions_report


def _run(version: str, verdicts: dict[str, str], error: str | None = None) -> dict:
    rows = [
        {"id": c, "verdict": v, "evidence": f"e {c}", "counterexample": "x" if v == "fails" else None}
        for c, v in verdicts.items()
    ]
    return {"version": version, "verdicts": verdicts, "error": error, "rows": rows, "system": None, "seconds": 1.0}


def _policy(name: str) -> dict[str, str]:
    return {cid: c.expected[name] for cid, c in registry.load_claims().items()}


def test_version_order_and_index_listing() -> None:
    """Releases sort numerically (0.5.9 < 0.5.10 < 0.5.10.post1) and the index listing keeps those >= the minimum."""
    assert sorted(["0.5.10", "0.5.9", "0.5.10.post1"], key=versions.version_key) == ["0.5.9", "0.5.10", "0.5.10.post1"]
    listing = "sglang (0.5.23)\nAvailable versions: 0.5.23, 0.5.18, 0.5.17, 0.5.16, 0.5.10.post1, 0.4.9\n"

    def fake(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 0, listing, "")

    assert versions.index_versions(runner=fake) == ["0.5.17", "0.5.18", "0.5.23"]

    def offline(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies sglang\n")

    with pytest.raises(RuntimeError, match="cannot list sglang releases .*Could not find"):
        versions.index_versions(runner=offline)


def test_a_release_matches_the_policy_whose_expectations_it_reproduces() -> None:
    """A release giving RELEASED's verdicts matches RELEASED (and only policies with the very same vector)."""
    vectors = versions.policy_vectors()
    got = versions.policy_match(_policy("RELEASED"), vectors)
    assert "RELEASED" in got["matches"] and got["differences"] == {}
    assert all(vectors[p] == vectors["RELEASED"] for p in got["matches"])


def test_a_release_matching_none_names_the_closest_and_the_differences() -> None:
    """One verdict off RELEASED: no match, RELEASED is the closest, and the differing claim is named."""
    release = {**_policy("RELEASED"), "C4": "fails"}
    got = versions.policy_match(release, versions.policy_vectors())
    assert got["matches"] == [] and got["closest"] == "RELEASED"
    assert got["differences"] == {"C4": {"release": "fails", "RELEASED": "holds"}}


def test_matrix_document_and_baseline_regressions(tmp_path: Path) -> None:
    """versions.json has the issue's keys; a changed verdict of a release in both runs is a regression."""
    runs = [_run("0.5.18", _policy("INTERIM_3D3194F")), _run("0.5.23", _policy("RELEASED")), _run("0.5.99", {}, "boom")]
    doc = versions.matrix(runs, "ci")
    assert doc["versions"] == ["0.5.18", "0.5.23"] and doc["errors"] == {"0.5.99": "boom"}
    assert doc["verdicts"]["C4"] == {"0.5.18": "fails", "0.5.23": "holds"}
    assert "INTERIM_3D3194F" in doc["policy_match"]["0.5.18"]["matches"]
    path = tmp_path / "versions_baseline.json"
    versions.write_baseline(path, doc)
    assert versions.compare(doc, versions.load_baseline(path)) == []
    changed = versions.matrix([_run("0.5.23", {**_policy("RELEASED"), "C7": "fails"})], "ci")
    assert versions.compare(changed, versions.load_baseline(path)) == [
        {"kind": "verdict", "name": "0.5.23/C7", "baseline": "holds", "current": "fails"}
    ]
    versions.write_baseline(path, changed)  # replaces 0.5.23, keeps 0.5.18
    kept = versions.load_baseline(path)
    assert kept["0.5.18"]["C4"] == "fails" and kept["0.5.23"]["C7"] == "fails"


def test_bad_baseline_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ValueError, match="is not a versions baseline"):
        versions.load_baseline(bad)


def test_written_matrix_has_markdown_json_and_grid(tmp_path: Path) -> None:
    """versions.md shows every release and its match, versions.json round-trips, the grid is a PNG."""
    doc = versions.matrix([_run("0.5.18", _policy("INTERIM_3D3194F")), _run("0.5.23", _policy("RELEASED"))], "dev")
    versions_report.write(tmp_path / "out", doc, claims.load_claim_statements(), [])
    md = (tmp_path / "out" / "versions.md").read_text()
    assert "| C4 |" in md and "0.5.18" in md and "INTERIM_3D3194F" in md and "RELEASED" in md
    assert json.loads((tmp_path / "out" / "versions.json").read_text())["versions"] == ["0.5.18", "0.5.23"]
    assert (tmp_path / "out" / "versions.png").read_bytes()[:4] == b"\x89PNG"


def test_ran_on_says_what_the_evidence_ran_on() -> None:
    """Provenance per method becomes one phrase: the model, real code, or real code except the modelled parts."""
    assert claims.ran_on({"process": "model", "materialize": "model"}) == "deferlab's model"
    assert claims.ran_on({"process": "real: x"}) == "real code"
    phrase = claims.ran_on({"process": "real: x", "deliver": "modelled: pickle", "vision_dp": "real: y; modelled: z"})
    assert phrase == "real code, except deliver (modelled), vision_dp (partly modelled)"
    assert claims.ran_on({}) == "not recorded"


def test_versions_cli_refuses_bad_usage(capsys: pytest.CaptureFixture) -> None:
    """Bad versions arguments exit 2 before any download, naming what is accepted."""
    from deferlab.reports.cli import main

    assert main(["versions", "latest"]) == 2
    assert "VERSION must look like 0.5.23" in capsys.readouterr().err
    assert main(["versions", "--newest", "0.5.23"]) == 2
    assert "--newest takes no VERSION" in capsys.readouterr().err
    assert main(["versions", "--profile", "fast"]) == 2
    assert "--profile must be one of" in capsys.readouterr().err


def test_the_suite_and_the_cli_read_one_registry() -> None:
    """The recorder's registry is reference.system.claims's, the CLI's claim ids are claims.toml's (in order), and
    both name real SGLang's column with the one label."""
    from deferlab.properties import verdicts
    from deferlab.reference.system.seam import SGLANG_LABEL, label_for

    assert verdicts.load_claims is registry.load_claims and verdicts.VERDICTS is registry.VERDICTS
    assert list(claims.load_claim_statements()) == list(registry.claim_ids()) == list(verdicts.load_claims())
    assert claims.REAL_LABEL == SGLANG_LABEL == label_for("sglang")
    assert claims.suite_path() == Path(verdicts.__file__).resolve().parent
