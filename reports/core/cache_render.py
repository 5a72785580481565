"""``deferlab cache`` as a table: the listing, a prune's removals and a verify's findings (`reports.core.cache`).

Why apart: the command parses, checks and acts; this only turns its JSON-shaped results into lines, so the
table and ``--format json`` say the same things.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def human(n: int) -> str:
    """``381 MB``: a size in the largest unit that keeps it at 1 or more (decimal units, as ``du -h --si``)."""
    value, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" or value >= 10 else f"{value:.1f} {unit}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell (the last one left ragged)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in [header, *rows]]


def listed(listing: dict[str, Any]) -> list[str]:
    """``deferlab cache``: the releases, the bytecode, then every other folder kept under the cache root."""
    out = [f"deferlab cache: {listing['cache']} (DEFERLAB_CACHE moves it)"]
    rows = [
        [
            r["engine"],
            r["version"],
            human(r["bytes"]),
            r["last_used"][:10],
            r["fetched_at"][:10] or "-",
            (r["wheel"] or "-") + ("" if r["wheel_kept"] else " (gone)"),
            r["sha256"][:12] or "-",
            r["origin"] or "-",
            r["status"] + (f": {r['detail']}" if r["detail"] else ""),
        ]
        for r in listing["releases"]
    ]
    header = ["ENGINE", "RELEASE", "SIZE", "LAST USED", "FETCHED", "WHEEL", "SHA256", "ORIGIN", "INTEGRITY"]
    out += table(header, rows) if rows else ["no release is cached"]
    b = listing["bytecode"]
    out.append(f"bytecode: {human(b['bytes'])} in {b['entries']} entries ({b['path']})")
    folders = listing["folders"]
    if folders:
        out.append("other folders (deferlab cache prune --checkouts, or --folder NAME):")
        rows = [[f["name"], f["kind"], human(f["bytes"]), f["last_used"][:10]] for f in folders]
        out += table(["FOLDER", "WHAT", "SIZE", "LAST USED"], rows)
    if any(r["status"] == "damaged" for r in listing["releases"]):
        out.append("a damaged release is mended from its kept wheel by its next load (or fetched again)")
    return out


def pruned(out: dict[str, Any]) -> list[str]:
    """``deferlab cache prune``: what was removed and what it freed."""
    rows = [[r["engine"], r["version"], human(r["bytes"])] for r in out["removed"]]
    lines = table(["ENGINE", "RELEASE", "FREED"], rows) if rows else ["no release removed"]
    if out["folders"]:
        lines += table(["FOLDER", "FREED"], [[f["name"], human(f["bytes"])] for f in out["folders"]])
    if out["bytecode"] is not None:
        b = out["bytecode"]
        lines.append(f"bytecode: removed {b['entries']} entries ({human(b['bytes'])})")
    return lines


def verified(out: dict[str, Any]) -> list[str]:
    """``deferlab cache verify``: each release's finding, and what was done about a damaged one."""
    rows = [
        [
            r["engine"],
            r["version"],
            r["status"],
            "; ".join(x for x in (r["detail"], r["action"]) if x) or "-",
        ]
        for r in out["releases"]
    ]
    lines = table(["ENGINE", "RELEASE", "STATUS", "DETAIL"], rows) if rows else ["no release is cached"]
    lines.append(out["summary"])
    return lines
