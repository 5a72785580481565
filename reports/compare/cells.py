"""The cells ``deferlab compare`` diffs: one per (claim, verdict column), and each model family's changes.

Why per column: a run judges every model family asked (``--model``), each on every path the engine serves it
with, and each (family, path) has verdicts of its own (`reference.system.systems.path_label`: ``SGLANG``,
``VLLM host-normalized``, ``qwen3-vl:VLLM``). Two sides are compared cell by cell through the one comparison
(`reports.core.diff`, keyed (claim, column)); Kimi-K3's default column is the bare claim (``where`` ""), so a
comparison without ``--model`` reads as it always did, and every other cell is named ``C15 on qwen3-vl:VLLM``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.rows import Column, Row
from deferlab.reference.system.signatures import signature_set
from deferlab.reference.system.systems import DEFAULT_FAMILY, LABELS
from deferlab.reports.core import diff as core_diff
from deferlab.reports.core import grouping
from deferlab.reports.core.claims import new_signatures


def where_of(row: Mapping[str, Any]) -> str:
    """A row's place in the diff: "" for Kimi-K3's default column (an engine's bare label), else the column."""
    column = row.policy if isinstance(row, Row) else str(row.get("policy", ""))
    return "" if column in LABELS.values() else column


def name_of(cid: str, where: str) -> str:
    """How a cell is named in lists and lines: ``C15`` (Kimi-K3's default column) or ``C15 on qwen3-vl:VLLM``."""
    return f"{cid} on {where}" if where else cid


def family_of(where: str) -> str:
    return Column.parse(where).family_name if where else DEFAULT_FAMILY


def _keyed(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(str(r["id"]), where_of(r)): r for r in rows}


def diff(
    base_rows: list[dict[str, Any]],
    head_rows: list[dict[str, Any]],
    statements: dict[str, dict[str, str]],
    *,
    fill: bool = True,
) -> list[dict[str, Any]]:
    """One entry per (claim, column) either side has, claim order then column (Kimi-K3's default column first;
    with ``fill``, a claim of ``statements`` neither side recorded is ``not-run`` on both in Kimi-K3's column):
    both verdicts and the change (`reports.core.diff`: a cell's signature set is `signature_set` of its row)."""
    b, h = _keyed(base_rows), _keyed(head_rows)
    seen = {k[0] for k in set(b) | set(h)}
    keys = set(b) | set(h) | ({(c, "") for c in statements if c not in seen} if fill else set())
    changes = core_diff.diff(_cells(b, keys), _cells(h, keys))
    out = []
    for c in changes:
        br, hr = b.get((c.subject, c.where), {}), h.get((c.subject, c.where), {})
        out.append(
            {
                "id": c.subject,
                "column": c.where,
                "family": family_of(c.where),
                "name": name_of(c.subject, c.where),
                "statement": statements.get(c.subject, {}).get("statement", "") or hr.get("statement", ""),
                "base": c.before,
                "head": c.after,
                "change": c.kind,
                "base_signature": _signature(br),
                "head_signature": _signature(hr),
                "new_signatures": list(c.new),
                "undocumented": new_signatures(hr),
                "head_counterexample": hr.get("counterexample") if c.after == "fails" else None,
            }
        )
    return out


def _cells(rows: dict[tuple[str, str], dict[str, Any]], keys: set[tuple[str, str]]) -> dict[tuple[str, str], core_diff.Cell]:  # fmt: skip
    missing = core_diff.Cell("not-run")
    return {k: core_diff.Cell(rows[k]["verdict"], signature_set(rows[k])) if k in rows else missing for k in keys}


def _signature(row: dict[str, Any]) -> str | None:
    return grouping.failure_signature(row.get("evidence", "")) if row.get("verdict") == "fails" else None


def by_family(claims: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The diff's entries of each model family, families in the registry's order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for c in claims:
        found.setdefault(c.get("family") or DEFAULT_FAMILY, []).append(c)
    return {f: found[f] for f in FAMILIES if f in found}


def family_lines(claims: list[dict[str, Any]]) -> list[str]:
    """compare.md's per-family lines: each family's changes, the cells named (nothing when one family ran)."""
    groups = by_family(claims)
    if len(groups) < 2:
        return []
    out = []
    for family, entries in groups.items():
        summary = core_diff.Summary()
        for e in entries:
            summary.by_kind[e["change"]].append(
                core_diff.Change(e["id"], e["column"], e["base"], e["head"], e["change"])
            )
        changed = "; ".join(
            f"{len(summary.by_kind[k])} {k} ({', '.join(name_of(c.subject, c.where) for c in summary.by_kind[k])})"
            for k in core_diff.CHANGES
            if summary.by_kind[k] and k != "unchanged"
        )
        out.append(f"- **{FAMILIES[family].display}**: {changed or 'nothing changed'} ({len(entries)} cells)")
    return out
