"""Prose that stays true: what the docs name exists, runs or imports; no old citation forms anywhere.

For each doc of `DOCS` (the README, the guides under ``docs/`` it links, the
folders' own READMEs): every repository path it names (a backticked path
whose first part is a folder or file of the checkout, or of the doc's own
folder; a relative link ``[x](path)``) exists; every ``deferlab SUB`` it
names (in backticks or a code block) has a working ``--help``; every
``bash scripts/X.sh`` exists; every backticked dotted module name of ours
(``deferlab.x.y`` or ``x.y.z`` with ``x`` one of the five folders) imports,
a ``module.attr`` form as its longest importable prefix plus attributes.

And a project rule: no tracked text file cites the old forms (the word
``SPEC`` or ``facts``, a space and a section number) except
``docs/CITATIONS.md``, which maps them to ``semantics §x.y``, and the history
section (§12) of ``docs/semantics.md``.

Checks the checkout (the docs are not installed): skipped when run as the
installed suite.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import deferlab.properties

ROOT = Path(deferlab.properties.__file__).resolve().parents[1]
CHECKOUT = (ROOT / "pyproject.toml").is_file() and (ROOT / "README.md").is_file()
# The guides the README links (the README itself stays one screen per workflow, at most README_MAX_LINES).
GUIDES = (
    "docs/engines.md",
    "docs/reviewing.md",
    "docs/mutation.md",
    "docs/api.md",
    "docs/report.md",
    "docs/layout.md",
)
DOCS = ("README.md", *GUIDES, "properties/SEAM.md", "properties/README.md", "sim/README.md", "impl/sglang/VERSIONS.md")
README_MAX_LINES = 200
TOPS = ("reference", "impl", "sim", "reports", "properties")
OLD_CITATION = re.compile(r"\bSPEC \d|\bfacts \d")
CITATION_EXEMPT = ("docs/CITATIONS.md",)

needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="the docs are checked in a source checkout, not installed")

_FENCE = re.compile(r"^\s*(```|~~~)")
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_SUBCOMMAND = re.compile(r"(?<![\w./~-])deferlab\s+([a-z][a-z0-9-]*)")
_SCRIPT = re.compile(r"\bbash\s+((?:\./)?scripts/[\w./-]+\.sh)\b")
_MODULE = re.compile(r"^(?:deferlab\.)?(?:reference|impl|sim|reports|properties)(?:\.[A-Za-z_]\w*)+(?:\(\))?$")
_PATHISH = re.compile(r"^[\w.*/-]+$")
_EXTENSIONS = (".py", ".md", ".toml", ".json", ".sh", ".png", ".tsv", ".txt", ".cfg", ".ini", ".yml", ".yaml")


@dataclass(frozen=True)
class Named:
    """One thing a doc names: its kind (path, link, subcommand, script, module), the text, the doc line."""

    kind: str
    text: str
    line: int


def _lines(text: str):
    """(line number, line, inside a fenced code block) for each line."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        yield number, line, fenced


def _strip_location(token: str) -> str:
    """``path::test``, ``path:12``, trailing punctuation and a trailing ``/`` dropped."""
    token = token.split("::")[0]
    token = re.sub(r":\d+(-\d+)?$", "", token)
    return token.rstrip(".,;:)").rstrip("/")


def named(text: str) -> list[Named]:
    """Everything ``text`` (markdown) names that this test checks."""
    found: list[Named] = []
    for number, line, fenced in _lines(text):
        scripts = [script.removeprefix("./") for script in _SCRIPT.findall(line)]
        code = ("" if line.lstrip().startswith("#") else line.split(" #")[0]) if fenced else line  # a comment is prose
        spans = [code] if fenced else _SPAN.findall(line)
        for span in spans:
            for sub in _SUBCOMMAND.findall(span):
                found.append(Named("subcommand", sub, number))
            stripped = span.strip()
            if not fenced and _MODULE.match(stripped):
                found.append(Named("module", stripped.removesuffix("()"), number))
                continue
            for token in stripped.split():
                token = _strip_location(token.split("=", 1)[-1] if token.startswith("--") else token)
                if ("/" in token or token.endswith(_EXTENSIONS)) and token.removeprefix("./") not in scripts:
                    if _PATHISH.match(token) and not token.startswith(("/", "~", "http")):
                        found.append(Named("path", token, number))
        found += [Named("script", script, number) for script in scripts]
        if not fenced:
            for target in _LINK.findall(line):
                if not re.match(r"^[a-z]+:", target) and not target.startswith("#"):
                    found.append(Named("link", target.split("#")[0], number))
    return found


@functools.cache
def _ignored(root: Path, token: str) -> bool:
    """A path git ignores (an output location such as ``reports/out/``): named before any run creates it.

    Asked as a file and as a folder: a pattern ending in ``/`` matches a path that does not exist yet (a clean
    clone) only when it is asked with the slash."""
    for name in (token, token.rstrip("/") + "/"):
        run = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", name], cwd=root, capture_output=True, timeout=60
        )
        if run.returncode == 0:
            return True
    return False


def _path_exists(token: str, root: Path, here: Path) -> bool | None:
    """Whether a named path exists (a glob: matches something), or is an ignored output location; None when it
    is not one of the repository's (its first part is no entry of the checkout's root nor of the doc's folder,
    e.g. a path inside SGLang)."""
    first = token.split("/")[0]
    bases = [base for base in (root, here) if first and (base / first).exists()]
    if not bases:
        return None
    for base in bases:
        if any(ch in token for ch in "*?["):
            if any(base.glob(token)):
                return True
        elif (base / token).exists() or _ignored(root, str((base / token).relative_to(root))):
            return True
    return False


@functools.cache
def _subcommand_works(sub: str) -> bool:
    run = subprocess.run(
        [sys.executable, "-m", "deferlab.reports.cli", sub, "--help"], capture_output=True, text=True, timeout=120
    )
    return run.returncode == 0


def _module_exists(name: str) -> bool:
    """``deferlab.``-prefixed ``name`` imports, or its longest importable prefix has the rest as attributes."""
    full = name if name.startswith("deferlab.") else f"deferlab.{name}"
    parts = full.split(".")
    for cut in range(len(parts), 1, -1):
        prefix = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(prefix)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if cut == len(parts):
            return True
        obj = importlib.import_module(prefix)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def stale(doc: str, text: str, root: Path = ROOT) -> list[str]:
    """``doc:line: what`` for each thing ``text`` (the doc's markdown) names that does not exist or work."""
    here = (root / doc).parent
    problems = []
    for item in named(text):
        if item.kind == "path":
            ok = _path_exists(item.text, root, here)
        elif item.kind == "link":
            ok = (here / item.text).exists()
        elif item.kind == "script":
            ok = (root / item.text).is_file()
        elif item.kind == "subcommand":
            ok = _subcommand_works(item.text)
        else:
            ok = _module_exists(item.text)
        if ok is False:
            problems.append(f"{doc}:{item.line}: {item.kind} {item.text!r}")
    return problems


@needs_checkout
def test_the_readme_is_short_and_its_guides_exist() -> None:
    """A newcomer's README is at most README_MAX_LINES lines; every ``docs/*.md`` it links exists, and it links
    every guide (the rest of the old README lives there)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move a part to docs/"
    linked = {target.split("#")[0] for target in _LINK.findall(text)}
    guides = {target for target in linked if re.fullmatch(r"docs/[\w.-]+\.md", target)}
    missing = sorted(target for target in guides if not (ROOT / target).is_file())
    assert not missing, f"README.md links docs that do not exist: {missing}"
    unlinked = sorted(set(GUIDES) - guides)
    assert not unlinked, f"README.md does not link these guides: {unlinked}"


@needs_checkout
@pytest.mark.parametrize("doc", DOCS)
def test_what_the_docs_name_exists(doc: str) -> None:
    """Every path, link, script, ``deferlab`` subcommand and module the doc names exists (and the help runs)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert any(item.kind == "path" for item in named(text)), f"{doc}: the checker found no path at all"
    problems = stale(doc, text)
    assert not problems, "stale references:\n" + "\n".join(problems)


def test_the_checker_finds_what_is_missing(tmp_path: Path) -> None:
    """The checker can fail: a missing path, a missing link, a bad subcommand, a missing script and a module that
    does not import are each reported; what exists is not."""
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "there.py").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test.sh").write_text("")
    text = "\n".join(
        [
            "See `sim/there.py` and `sim/gone.py`, [a plot](sim/nothing.png), `python/sglang` (not ours).",
            "Run `deferlab frobnicate --x` or `deferlab report`, then `bash scripts/test.sh` and `bash scripts/no.sh`.",
            "Modules: `reference.system.config`, `sim.nowhere_at_all`, `reference.system.config.PreprocessConfig`,",
            "`reference.system.config.NoSuchThing`.",
            "```bash",
            "deferlab nosuchcommand --help   # deferlab prose in a comment: ignored",
            "```",
        ]
    )
    problems = stale("DOC.md", text, root=tmp_path)
    assert problems == [
        "DOC.md:1: path 'sim/gone.py'",
        "DOC.md:1: link 'sim/nothing.png'",
        "DOC.md:2: subcommand 'frobnicate'",
        "DOC.md:2: script 'scripts/no.sh'",
        "DOC.md:3: module 'sim.nowhere_at_all'",
        "DOC.md:4: module 'reference.system.config.NoSuchThing'",
        "DOC.md:6: subcommand 'nosuchcommand'",
    ], problems


def _tracked_text_files(root: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.decode(errors='replace').strip()}")
    return [p for p in out.stdout.decode().split("\0") if p]


def _history_section(text: str) -> tuple[int, int]:
    """The line span (start, end) of ``## 12.`` in docs/semantics.md (0, 0 when absent)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^## 12\b", line)), None)
    if start is None:
        return (0, 0)
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^## ", lines[i])), len(lines))
    return (start + 1, end)  # 1-based, inclusive start, exclusive end+1


def old_citations(path: str, text: str) -> list[str]:
    """``path:line: text`` of each old citation form in ``text``."""
    if path in CITATION_EXEMPT:
        return []
    start, end = _history_section(text) if path == "docs/semantics.md" else (0, 0)
    return [
        f"{path}:{n}: {line.strip()[:120]}"
        for n, line in enumerate(text.splitlines(), 1)
        if OLD_CITATION.search(line) and not start <= n <= end
    ]


@needs_checkout
def test_no_old_citation_forms() -> None:
    """Citations are ``semantics §x.y`` (docs/CITATIONS.md maps the old ``SPEC``/``facts`` numbers)."""
    problems = []
    for path in _tracked_text_files(ROOT):
        file = ROOT / path
        if not file.is_file():
            continue  # deleted in the work tree, not yet committed
        data = file.read_bytes()
        if b"\0" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        problems += old_citations(path, text)
    assert not problems, "old citation forms (use semantics §x.y; docs/CITATIONS.md):\n" + "\n".join(problems)


def test_the_citation_rule_can_fail() -> None:
    """An old form is found anywhere but the exempt places; the new form is not."""
    old = "SP" + "EC 3.4"  # spelled apart so this file does not cite it
    fact = "fac" + "ts 5.1"
    text = f"see {old}\nsemantics §3.4 is fine\n## 12. History\nonce {fact}\n## 13. Next\nagain {fact}\n"
    assert old_citations("x.py", text) == [f"x.py:1: see {old}", f"x.py:4: once {fact}", f"x.py:6: again {fact}"]
    assert old_citations("docs/semantics.md", text) == [
        f"docs/semantics.md:1: see {old}",
        f"docs/semantics.md:6: again {fact}",
    ]
    assert old_citations("docs/CITATIONS.md", text) == []


def section_problems(text: str) -> list[str]:
    """Headings ``## N.`` / ``### N.M`` of the semantics that repeat a number or break the order: code cites
    ``semantics §x.y``, so a number must name one section (a merge once left §21.7 twice)."""
    problems: list[str] = []
    seen: set[tuple[int, ...]] = set()
    last: tuple[int, ...] = ()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if not m:
            continue
        number = tuple(int(x) for x in m.group(1).split("."))
        if number in seen:
            problems.append(f"line {lineno}: §{m.group(1)} again")
        elif number < last:
            problems.append(f"line {lineno}: §{m.group(1)} after §{'.'.join(map(str, last))}")
        seen.add(number)
        last = max(last, number)
    return problems


def test_semantics_sections_are_unique_and_in_order() -> None:
    text = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    assert section_problems(text) == []


def test_the_section_rule_can_fail() -> None:
    text = "## 2. A\n### 2.1 x\n### 2.3 y\n### 2.2 z\n### 2.3 again\n## 3. B\n"
    assert section_problems(text) == ["line 4: §2.2 after §2.3", "line 5: §2.3 again"]
