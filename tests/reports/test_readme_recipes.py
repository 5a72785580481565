"""The docs' reviewer recipes (compare, reproducers, CI) show what the tools really produce.

Why: a recipe whose output drifted from the tool is the first wrong thing a
new user reads. The shown compare output is re-rendered from the recorded
``compare.json`` it names; the reproducer shown is the recorded file, and
that file is what `reports.repro.cli` writes from the same JSON today; the CI
recipe's ``deferlab compare`` line is parsed by deferlab's own CLI and run on a
two-commit repository (fake sides), exiting 1 exactly when the PR newly
breaks a claim, with the JUnit file and the job summary it promises.
The recipes live in ``docs/reviewing.md``; a marked block is looked up in README.md and then in every
``docs/*.md`` but ``semantics.md`` and ``CITATIONS.md``, whichever holds it. The shown reproducer sits between
``<!-- fmt:off -->`` and ``<!-- fmt:on -->``: ruff formats Python blocks in markdown, and this one must stay the
recorded file byte for byte. Only in a source checkout: an installed package has no README beside it.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab import reports
from deferlab.reference.system.systems import System
from deferlab.reports.cli import build_parser
from deferlab.reports.compare import cli as compare
from deferlab.reports.compare import render as compare_render
from deferlab.reports.core.runner import Request, RunRecord

ROOT = Path(reports.__file__).resolve().parents[1]
README = ROOT / "README.md"
NOT_GUIDES = ("semantics.md", "CITATIONS.md")
PAGES = [README, *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in NOT_GUIDES)]
TEXTS = {page.relative_to(ROOT).as_posix(): page.read_text() for page in PAGES if README.is_file() and page.is_file()}
TEXT = "\n".join(TEXTS.values())
pytestmark = pytest.mark.skipif(not TEXT, reason="no README.md beside the package (an installed deferlab)")


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict switch off unless a test turns it on (scripts/test.sh exports DEFERLAB_STRICT=1)."""
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def _block(marker: str) -> tuple[str, str]:
    """(the path the ``<!-- marker: PATH -->`` comment names, the fenced block right after it), from the first
    of README.md and the guides that holds the marker."""
    for text in TEXTS.values():
        m = re.search(rf"<!-- {marker}(?:: (\S+))? -->\n```[\w-]*\n(.*?)\n```", text, re.S)
        if m is not None:
            return m.group(1) or "", m.group(2)
    raise AssertionError(f"no <!-- {marker} --> block in {', '.join(TEXTS)}")


def _written_by(text: str) -> str:
    """``text`` without the header's "Written by" line (deferlab's version and commit change with every commit)."""
    return re.sub(r"^# Written by: .*\n", "", text, flags=re.M)


def test_the_compare_output_shown_is_the_summary_of_the_recorded_json() -> None:
    where, shown = _block("compare-output")
    doc = json.loads((ROOT / where).read_text())
    assert shown == "\n".join(compare_render.summary_markdown(doc))
    assert doc["exit_status"] == 0 and doc["changes"]["newly holding"] == ["C9"]  # what the prose says of it
    # the "in full" file the docs link: today's rendering of the same JSON (regenerate it when that changes)
    assert (ROOT / where).with_name("compare.md").read_text() == compare_render.markdown(doc)


def test_the_reproducer_shown_is_the_recorded_file_and_what_repro_writes_from_that_json(tmp_path: Path) -> None:
    where, shown = _block("reproducer")
    recorded = (ROOT / where).read_text()
    assert shown == recorded.rstrip("\n")
    doc = json.loads((ROOT / Path(where).parents[1] / "compare.json").read_text())
    results = {role: {"system": doc[role.lower()]["system"]} for role in ("BASE", "HEAD")}
    made = compare_render.reproducers(tmp_path, doc, results)
    assert f"repro/{Path(where).name}" in made["written"]
    assert _written_by((tmp_path / "repro" / Path(where).name).read_text()) == _written_by(recorded)


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _pull_request(tmp: Path) -> tuple[Path, str]:
    """A repository with a main commit and a PR commit on top (an SGLang-shaped tree); (path, merge base)."""
    repo = tmp / "sglang"
    (repo / "python" / "sglang").mkdir(parents=True)
    (repo / "python" / "sglang" / "__init__.py").write_text("")
    _git(repo, "init", "-q")
    for message in ("main", "the PR"):
        (repo / "python" / "sglang" / "version.py").write_text(f"__version__ = {message!r}\n")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return repo, _git(repo, "rev-parse", "HEAD~1")


def _recipe_compare_line() -> list[str]:
    _, yaml = _block("ci-recipe")
    lines = [x.strip() for x in yaml.splitlines() if x.strip().startswith("deferlab compare")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])[1:]


@pytest.mark.parametrize("head_c12", ["holds", "fails"])
def test_the_ci_recipe_fails_the_job_only_when_the_pr_newly_breaks_a_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_c12: str
) -> None:
    """The recipe's line, with $PWD the PR's checkout and $base its merge base, through deferlab's own parser:
    exit 1 with C12 newly failing (JUnit failure, job summary), 0 when nothing newly fails."""
    repo, base = _pull_request(tmp_path)
    argv = [a.replace("$PWD", str(repo)).replace("$base", base) for a in _recipe_compare_line()]
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))  # PATH@REV's tree: <cache>/checkouts/<sha>
    assert argv[0] == "compare"
    args = build_parser()[0].parse_args(argv)
    assert args.base == f"{repo}@{base}" and args.head == str(repo) and str(args.junit) == "claims.xml"

    def loader(system: System) -> str:
        return "sglang-0.5.23"

    def runner(request: Request, **kw: Any) -> RunRecord:
        c12 = "holds" if request.system.spec != str(repo) else head_c12  # HEAD is the PR's checkout itself
        evidence = {
            "holds": "no counterexample",
            "fails": "AssertionError: RGBa: a transparent pixel is not background",
        }
        rows = [
            {
                "id": c,
                "policy": "SGLANG",
                "statement": f"claim {c}",
                "verdict": v,
                "evidence": evidence[v],
                "counterexample": "PIL.Image(mode='RGBa')" if v == "fails" else None,
            }  # fmt: skip
            for c, v in (("C1", "holds"), ("C12", c12))
        ]
        system = {"name": "sglang-0.5.23", "kind": "checkout"}
        return RunRecord(request.system, request.profile, rows=rows, described=system, rc=0, wrote=True, seconds=0.1)

    rc = compare.run(args, io.StringIO(), runner=runner, loader=loader)
    doc = json.loads((tmp_path / "claims" / "compare.json").read_text())
    assert doc["base"]["kind"] == "revision" and doc["base"]["revision"] == base and doc["head"]["kind"] == "checkout"
    suite = ET.parse(tmp_path / "claims.xml").getroot()
    failures = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    if head_c12 == "fails":
        assert rc == 1 and doc["changes"]["newly failing"] == ["C12"]
        assert any("C12" in (name or "") for name in failures)
    else:
        assert rc == 0 and doc["changes"]["newly failing"] == [] and failures == []
    assert "# Claims, BASE -> HEAD" in summary.read_text()
    assert _git(repo, "status", "--porcelain") == ""  # the PR's checkout is left as it was
