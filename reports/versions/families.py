"""families.md: the model families x engines table of a versions run, each engine at the newest release it ran.

Why a table of its own: versions.md has a column per release, family and served path (fifteen for one SGLang
and one vLLM release under ``--model all``); a reader asking "which family is served as trained where?" wants
one cell per family and engine. Each cell lists the claims' verdicts on the family's default serving path
(semantics §18.7's tables), claim order, a failure in capitals with its severity class (semantics §21:
``C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only)``); a claim
with no verdict there (``n/a``: C4 where an engine has one path, C13 and C14 for a normalization-only family;
``not-run``: C4 on SGLang, whose C4 is the Kimi-K3 owner path's) is left out. A family the release does not
serve is ``n/a`` with its reason (`reference.system.families.Family.not_served`), a release that could not be
checked says so. The README embeds `table` between `BEGIN` and `END`; ``deferlab versions --format families``
prints the file.
"""

from __future__ import annotations

from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.systems import ENGINES, release_key
from deferlab.reports.versions import columns as cols
from deferlab.reports.versions.matrix import severity_of

BEGIN = "<!-- deferlab versions --format families: begin -->"
END = "<!-- deferlab versions --format families: end -->"
SHOWN = {"holds": "holds", "holds-with-caveat": "holds (caveat)", "fails": "FAILS"}


def newest(doc: dict[str, Any]) -> dict[str, str]:
    """engine -> the newest release column the run has, engines in registry order."""
    found: dict[str, list[str]] = {}
    for release in doc.get("releases") or [cols.parse(v).release for v in doc["versions"]]:
        found.setdefault(cols.parse(release).engine, []).append(release)
    return {e: max(found[e], key=lambda r: release_key(cols.parse(r).version)) for e in ENGINES if e in found}


def families_of(doc: dict[str, Any]) -> list[str]:
    """The families the run asked for (registry order); a document without the list: those its columns show."""
    asked = doc.get("families") or [cols.parse(v).family for v in doc["versions"]]
    return [f for f in FAMILIES if f in asked]


def cell(doc: dict[str, Any], family: str, release: str) -> str:
    """One family on one release: its default path's verdicts, or why there are none."""
    if release in doc.get("errors", {}) and not any(cols.parse(v).release == release for v in doc["versions"]):
        return "could not be checked (versions.md says why)"
    why = doc.get("not_served", {}).get(release, {}).get(family)
    if why:
        return why.replace("|", "\\|")
    c = cols.parse(release)
    name = cols.Column(c.engine, c.version, family).name
    if name not in doc["versions"]:
        return (FAMILIES[family].not_served(c.engine, c.version) or "not run").replace("|", "\\|")
    severity = severity_of(doc).get(name, {})
    shown = [
        f"{cid} {SHOWN[per[name]]}" + (f" ({severity[cid]})" if per[name] == "fails" and cid in severity else "")
        for cid, per in doc["verdicts"].items()
        if per.get(name) in SHOWN and cid in FAMILIES[family].claims
    ]
    return ", ".join(shown) or "n/a"


def table(doc: dict[str, Any]) -> list[str]:
    """The markdown table: a row per family asked, a column per engine at its newest release."""
    heads = newest(doc)
    names = [f"{ENGINES[e].display} {cols.parse(r).version}" for e, r in heads.items()]
    out = ["| model family | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for family in families_of(doc):
        cells = [cell(doc, family, r) for r in heads.values()]
        out.append(f"| {FAMILIES[family].display} | " + " | ".join(cells) + " |")
    return out


def markdown(doc: dict[str, Any]) -> str:
    """families.md: the title, what a cell says, the table."""
    out = [
        f"# Model families x engines: the served-vs-trained claims (profile `{doc['profile']}`)",
        "",
        "Each engine at the newest release this run checked, each family on its default serving path (semantics "
        "§18.7); a claim not listed has no verdict there (n/a, or C4 on SGLang: its owner path's, Kimi-K3's). "
        "A failure names its severity class (semantics §21.1, worst first: crash, sequence, tower-input; "
        "float32-only and cost are informational). versions.md has every release, path and claim; findings.md "
        "one finding per root cause.",
        "",
        *table(doc),
    ]
    return "\n".join(out) + "\n"
