"""A picture per defect finding, ``F<n>.png`` beside findings.md (issue 32, item 5).

Why a picture: a finding's numbers say how much; its picture says where and how, in the model's terms: the
frames each side takes from a clip (a sequence finding of video claims), the decoded images side by side (a
decode finding), served/trained tokens over image sizes (a geometry finding), the two sides' levels at the
minimal input (a tower-input finding). Each is drawn from what the document recorded (``figures[column][claim]``
and ``impact[column][claim]``, semantics §21.7), the finding's representative cell first, then its other cells;
a finding with nothing to draw says why (``no_picture``), never a blank. A crash needs none (the exception is the
evidence), and the informational classes are folded away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.reference.system.errors import InputValueError
from deferlab.reports.findings import plots
from deferlab.reports.findings.group import TOKENS_ONLY
from deferlab.reports.findings.render import display, span

VIDEO_STRIPS = ("C16", "C17", "C18")  # the claims whose cells record a clip's frame strips (one sweep, §20)
WHY_NONE = {  # the effect of a finding with nothing drawable, and why (beside the cell that was looked at)
    "normalization": "a normalization finding states counts after the cast; no tensors are recorded to draw",
    "staging": "a staging finding is a key or dimension written otherwise; nothing recorded is an image",
    "gate": "a gate finding changes where the work is done, not what the model sees",
}


def _cells(d: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(claim, column) of the finding's cells, its minimal (representative) cell first."""
    first = (d["minimal_cell"]["claim"], d["minimal_cell"]["column"])
    return list(dict.fromkeys([first, *((c["claim"], c["column"]) for c in d["cells"])]))


def _get(doc: Mapping[str, Any], what: str, column: str, claim: str) -> Any:
    return ((doc.get(what) or {}).get(column) or {}).get(claim)


def _title(d: Mapping[str, Any], what: str, column: str) -> str:
    fams = d["families"]
    families = ", ".join(fams) if len(fams) <= 3 else f"{len(fams)} families"
    head = f"{d['id']} [{d['severity']}] {display(d['engine'])} {span(d)}: {d['function']}"
    return f"{head}\n{what}; {column} ({families or 'default family'})"


Drawer = Callable[[Path], Path]


def _tokens_only(d: Mapping[str, Any]) -> bool:
    """A video geometry finding whose failure names only the token count (§21.4): its cell's frame strips show
    frames that agree, so they would picture another difference of the cell, not this one."""
    return bool(TOKENS_ONLY.search(str(d.get("failure") or "")))


def _strips(doc: Mapping[str, Any], d: Mapping[str, Any], claim: str, column: str) -> Drawer | None:
    from deferlab.reports.report.plots.video import strips_png

    if d["severity"] != "sequence" or _tokens_only(d):
        return None
    figure = next(
        (
            f
            for c in (claim, *VIDEO_STRIPS)
            if (f := _get(doc, "figures", column, c)) and f.get("kind") == "video-strips"
        ),
        None,
    )
    if figure is None:
        return None
    return lambda path: strips_png(figure, _title(d, "frames taken", column), path)


def _bytes(doc: Mapping[str, Any], d: Mapping[str, Any], claim: str, column: str) -> Drawer | None:
    from deferlab.reports.report.plots.bytes import side_by_side

    figure = _get(doc, "figures", column, claim)
    if not isinstance(figure, dict) or figure.get("kind") != "bytes-side-by-side":
        return None
    pair = [np.asarray(figure[k], np.uint8) for k in ("trained", "served")]
    what = f"{figure.get('class', 'an image')} decoded by {figure.get('side', 'the served side')}"
    return lambda path: side_by_side(*pair, _title(d, what, column), path)


def _map(doc: Mapping[str, Any], d: Mapping[str, Any], claim: str, column: str) -> Drawer | None:
    record = (_get(doc, "impact", column, claim) or {}).get("map")
    if record is None:
        return None
    minimal = (d["minimal_cell"]["claim"], d["minimal_cell"]["column"]) == (claim, column)
    given = d.get("minimal_input") if minimal else None  # (width, height) of a C13 counterexample
    given = given if isinstance(given, list) and len(given) == 2 and all(isinstance(v, int) for v in given) else None
    return lambda path: plots.token_map_png(record, _title(d, "served/trained tokens over sizes", column), path, given)


def _levels(doc: Mapping[str, Any], d: Mapping[str, Any], claim: str, column: str) -> Drawer | None:
    pixels = (_get(doc, "impact", column, claim) or {}).get("pixels")
    if not isinstance(pixels, dict) or "served_levels" not in pixels:
        return None
    return lambda path: plots.levels_png(pixels, _title(d, f"{claim} levels at the minimal input", column), path)


# what each claim's cell can be drawn by, in the order tried
KINDS: dict[str, tuple[Callable[..., Drawer | None], ...]] = {
    **dict.fromkeys(("C13", "C17"), (_map, _strips)),
    **dict.fromkeys(("C16", "C18"), (_strips,)),
    "C19": (_levels, _strips),
    "C20": (_bytes, _levels),
}
WANTED = {  # what a cell of each claim would be drawn from: the reason a finding has no picture names it
    "C13": "no token map in C13's impact (`impact.map`)",
    "C17": "no token map or frame strips recorded",
    "C16": "no frame strips recorded (`figures`, kind video-strips)",
    "C18": "no frame strips recorded (`figures`, kind video-strips)",
    "C19": "no pixel levels in C19's impact and no frame strips for a sequence change",
    "C20": "no decoded pair recorded (`figures`, kind bytes-side-by-side)",
}


def why_none(d: Mapping[str, Any]) -> str:
    """Why finding ``d`` has no picture (a crash and the informational classes never get one)."""
    if d["severity"] == "crash":
        return "a crash: the exception is the evidence (see Served; Expected where the engine serves what the checkpoint refuses)"
    if d["severity"] in ("float32-only", "cost"):
        return "informational (folded): nothing the model sees differs"
    claim, column = d["minimal_cell"]["claim"], d["minimal_cell"]["column"]
    if _tokens_only(d):
        return "the frames, size and grid agree; only the token count differs (see Served)"
    effect = str(d.get("effect", "")).split("/")[0]
    if effect in WHY_NONE:
        return WHY_NONE[effect]
    wanted = WANTED.get(claim, f"no pixel levels in {claim}'s impact (`impact.pixels.served_levels`)")
    return f"{wanted} for {column}"


def drawer(doc: Mapping[str, Any], d: Mapping[str, Any]) -> Drawer | None:
    """What draws finding ``d``'s picture from ``doc``, its cells tried representative first; None: nothing."""
    if d["severity"] in ("crash", "float32-only", "cost"):
        return None
    for claim, column in _cells(d):
        for kind in KINDS.get(claim, (_levels,)):
            found = kind(doc, d, claim, column)
            if found is not None:
                return found
    return None


def draw(doc: Mapping[str, Any], result: dict[str, Any], out: Path) -> list[Path]:
    """Each finding of ``result`` (`render.document`) gets ``picture`` (``F<n>.png``, written into ``out``) or
    None and ``no_picture`` (why); returns the files written. A recorded figure that cannot be drawn is a reason,
    not a failure of the command: the findings are still written."""
    written = []
    for d in result["findings"]:
        d["picture"], d["no_picture"] = None, None
        draw_it = drawer(doc, d)
        if draw_it is None:
            d["no_picture"] = why_none(d)
            continue
        name = f"{d['id']}.png"
        try:
            written.append(draw_it(Path(out) / name))
        except (InputValueError, KeyError, TypeError, ValueError) as e:
            d["no_picture"] = f"the recorded figure cannot be drawn ({type(e).__name__}: {e})"
            continue
        d["picture"] = name
    return written
