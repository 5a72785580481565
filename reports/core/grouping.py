"""One entry per distinct failure: failing verdicts grouped by (claim, failure signature).

Why: the same flaw shows up under many policies, releases or engines with the
same message (numbers aside), and a reader should meet it once, with the list
of everything it applies to, rather than once per column. The *signature* of a
failure is its exception type and message with numbers, sizes and memory
addresses normalized, so two runs that found the same flaw on different
shrunk inputs group together, and a failure whose type or wording changed
does not. Text is never cut without the full text beside it: the Markdown
helpers give a short line and the whole evidence and counterexample in a
collapsible ``<details>`` block; the groups keep every member's full text for
the JSON. The signature itself is the shared description's
(`reference.system.signatures`, re-exported here), which the claim tests use too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from deferlab.reference.system.signatures import failure_signature, failure_text, normalize

__all__ = [
    "details",
    "failure_entries",
    "failure_signature",
    "failure_text",
    "fenced",
    "group_failures",
    "markdown_groups",
    "normalize",
    "short",
]

SHORT = 160  # characters of a Markdown entry's one-line summary


def failure_entries(rows: Iterable[dict[str, Any]], where: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """The failing verdict rows (``verdict == "fails"``) as entries to group; ``where(row)`` names what the row
    is about (a policy, a release, an engine and version)."""
    out = []
    for row in rows:
        if row.get("verdict") != "fails":
            continue
        out.append(
            {
                "claim": str(row["id"]),
                "where": where(row),
                "evidence": str(row.get("evidence") or ""),
                "counterexample": row.get("counterexample"),
                "signature": failure_signature(str(row.get("evidence") or "")),
            }
        )
    return out


def group_failures(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One group per (claim, signature), in first-seen order: ``where`` lists every label it applies to, and
    ``evidence`` / ``counterexample`` are the first member's, in full; ``members`` keeps each one's full text."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for e in entries:
        key = (e["claim"], e["signature"])
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "claim": e["claim"],
                "signature": e["signature"],
                "failure": failure_text(e["evidence"]),
                "where": [],
                "evidence": e["evidence"],
                "counterexample": e.get("counterexample"),
                "members": [],
            }
        if e["where"] not in g["where"]:
            g["where"].append(e["where"])
        g["members"].append({k: e.get(k) for k in ("where", "evidence", "counterexample")})
    return list(groups.values())


def short(text: Any, n: int = SHORT) -> str:
    """``text`` on one line, at most ``n`` characters (cut with "…"); only for a line whose full text is beside it."""
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def fenced(text: Any) -> list[str]:
    """``text`` as a fenced code block whose fence no backtick run inside it can close."""
    body = str(text)
    runs = [len(r) for r in re.findall(r"`+", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, *body.splitlines(), fence]


def details(summary: str, sections: Iterable[tuple[str, Any]]) -> list[str]:
    """A collapsible ``<details>`` block: ``summary`` and each (title, full text) as a fenced block."""
    out = ["<details><summary>" + _html(summary) + "</summary>", ""]
    for title, text in sections:
        if text in (None, ""):
            continue
        out += [f"{title}:", "", *fenced(text), ""]
    return out + ["</details>"]


def markdown_groups(groups: Iterable[dict[str, Any]], statements: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Markdown for grouped failures: per group one bullet (claim, where it applies, the failure in short) and
    the claim's statement and the full evidence and counterexample of every distinct member in a ``<details>``
    block (the bullet's cuts each have their full text there)."""
    lines: list[str] = []
    for g in groups:
        stmt = (statements or {}).get(g["claim"], {}).get("statement", "")
        where = ", ".join(f"`{w}`" for w in g["where"])
        head = f"- **{g['claim']}**" + (f" ({short(stmt, 90)})" if stmt else "") + f" on {where}: "
        lines.append(head + "`" + short(g["failure"]).replace("`", "'") + "`")
        texts: dict[tuple[str, str], list[str]] = {}
        for m in g["members"]:
            texts.setdefault((m["evidence"], _text(m.get("counterexample"))), []).append(m["where"])
        sections: list[tuple[str, Any]] = [("statement", stmt)]  # the bullet shortens it: in full here
        for (evidence, counterexample), wheres in texts.items():
            label = f" ({', '.join(wheres)})" if len(texts) > 1 else ""
            sections += [(f"evidence{label}", evidence), (f"counterexample{label}", counterexample)]
        lines += ["", *("  " + x if x else "" for x in details("full text", sections)), ""]
    return lines


def _html(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text(value: Any) -> str:
    return "" if value is None else str(value)
