"""The reproducer templates: per claim and engine, a standalone pytest test calling the engine's own functions.

Why templates and not generated code: a reproducer goes to an upstream
maintainer, so it must be short, read as a test they would write, and import
nothing of deferlab. Each template is plain text with ``$placeholders``
(`string.Template`), filled from the claim's recorded minimal counterexample
by its ``fit`` function; ``fit`` returns None when the counterexample or the
recorded failure is not the one the template reproduces (then no file is
written, and the caller says so). Nothing here is an engine's code: a
template only *calls* it, the way the engine's own unit tests build its
objects (``object.__new__`` and the few attributes a method reads). SGLang's
texts are `reports.repro.sglang_texts`; its C9 template is `reports.repro.ipc`'s; the served-vs-trained ones
(C13, C14, vLLM's C15) are `reports.repro.served`'s; `templates` gives an engine's set; the model families'
columns (and vLLM's C4) are `reports.repro.families`'.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from string import Template
from typing import Any

from deferlab.reference.system.systems import ENGINES as REGISTERED
from deferlab.reports.repro.engines import repro_of
from deferlab.reports.repro.fitting import GEOMETRY, K3_GEOMETRY, PIL_IMAGE, Template_, ints, literal, stats_pair
from deferlab.reports.repro.sglang_texts import C3, C10, C11, C12, C15, OWNER_GRID


def fit_c3(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    stats = stats_pair(ce, failure, "levels differ in FP32")
    return None if stats is None else {"mean": repr(stats[0]), "std": repr(stats[1])}


def fit_c15(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """C15's counterexample is the (mean, std) pair whose levels differ; only the FP32 difference is reproduced
    (a difference after the BF16 cast reads the same in this test, which compares FP32)."""
    stats = stats_pair(ce, failure, "levels differ from the checkpoint in FP32")
    return None if stats is None else {"mean": repr(stats[0]), "std": repr(stats[1])}


def fit_c10(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "call site 'request'" not in failure or not isinstance(ce, list) or len(ce) not in (2, 3):
        return None
    if len(ce) == 3 and ce[2] != "request":  # a counterexample that names its call site: only the request path's
        return None
    geometry, shapes = ints(str(ce[0]), GEOMETRY), ce[1]
    if geometry is None or not all(isinstance(s, list | tuple) and len(s) == 3 for s in shapes):
        return None
    return {"geometry": repr(geometry), "shapes": repr([tuple(int(v) for v in s) for s in shapes])}


def fit_c11(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    m = re.fullmatch(r"ArrayImage\(torch \(([\d, ]+)\) torch\.uint8, layout=(\w+), w=(\d+), h=(\d+), c=\d+\)", str(ce))
    if m is None or not failure.startswith(("IndexError", "RuntimeError", "AssertionError")):
        return None
    shape = tuple(int(v) for v in m.group(1).replace(" ", "").split(",") if v)
    return {"geometry": repr(K3_GEOMETRY), "shape": repr(shape), "layout": m.group(2), "width": m.group(3),
            "height": m.group(4)}  # fmt: skip


_PIL = re.compile(PIL_IMAGE)


def fit_c12(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "fully transparent pixel is not background" not in failure or not isinstance(ce, list) or len(ce) != 2:
        return None
    m = _PIL.fullmatch(str(ce[0]))
    bg = re.fullmatch(r"BackgroundConfig\((.*)\)", str(ce[1]))
    if m is None or bg is None or literal(m.group(4)):  # an image with info (a key) needs more than frombytes
        return None
    fields = dict(re.findall(r"(\w+)=('[^']*'|\w+)", bg.group(1)))
    background = {
        "pattern": literal(fields["pattern"]),
        "chessboard_square_size": int(fields["square_size"]),
        "chessboard_white_value": int(fields["white_value"]),
        "chessboard_gray_value": int(fields["gray_value"]),
        "chessboard_square_on_top_left": fields["square_on_top_left"] == "True",
    }
    palette = f"bytes.fromhex({m.group(6)!r})" if m.group(6) is not None else "None"
    return {"mode": repr(m.group(1)), "size": repr((int(m.group(2)), int(m.group(3)))),
            "data": f"bytes.fromhex({m.group(5)!r})", "palette": palette, "background": repr(background)}  # fmt: skip


def _sizes(text: str) -> list[tuple[int, int]]:
    """(width, height) of every image in a counterexample: PIL sizes, CHW tensor shapes, in order."""
    found = re.finditer(r"size=\((\d+), (\d+)\)|shape=\(\d+, (\d+), (\d+)\)", text)
    return [(int(m[1]), int(m[2])) if m[1] else (int(m[4]), int(m[3])) for m in found]


def fit_owner_grid(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "produced wrong grids" not in failure:
        return None
    text = str(ce)
    sizes = _sizes(text)
    if len(sizes) < 2:
        return None
    geometry = ints(text, GEOMETRY) or {**K3_GEOMETRY, "patch_size": 1, "merge_kernel_size": 1}
    last = ce[-1] if isinstance(ce, list) and ce else None  # an owner partition, where the claim drew one
    owners = [o for o in last if isinstance(o, list)] if isinstance(last, list) else []
    owner = next((o for o in owners if o and o != list(range(len(o)))), [len(sizes) - 1])
    return {"geometry": repr(geometry), "sizes": repr(sizes), "owner": repr(owner)}


TEMPLATES: dict[str, Template_] = {
    "C3": Template_(C3, fit_c3, "scale/bias normalization differs from the eager formula in FP32"),
    "C10": Template_(C10, fit_c10, "the request path decides for all of a request's images at once"),
    "C11": Template_(C11, fit_c11, "the gate admits a raw array it cannot measure"),
    "C12": Template_(C12, fit_c12, "a fully transparent pixel does not end on the background"),
    "C15": Template_(C15, fit_c15, "the served normalization differs from the checkpoint's float32 values"),
    **{
        cid: Template_(OWNER_GRID, fit_owner_grid, "an owner whose images are not 0..k-1 fails its grid check")
        for cid in ("C4", "C5", "C6", "C7")
    },
}
ENGINES = tuple(REGISTERED)


_SERVED = "the served pixels of an image are more than one level off the checkpoint processor's"
_GEOMETRY = "the served resize target, padding or prompt tokens differ from the checkpoint's"


def sglang_templates() -> dict[str, Template_]:
    """SGLang's: `TEMPLATES` plus C9, C13, C14 (`reports.repro.engine_sets`)."""
    from deferlab.reports.repro import ipc as repro_ipc
    from deferlab.reports.repro import served as repro_served

    return {
        **TEMPLATES,
        "C9": Template_(
            repro_ipc.C9,
            repro_ipc.fit_c9,
            "a CUDA IPC feature-pool slot never frees once every rank is done (acknowledgement counts)",
        ),
        "C13": Template_(repro_served.C13, repro_served.fit_c13, _GEOMETRY),
        "C14": Template_(repro_served.C14, repro_served.fit_c14, _SERVED),
    }


def vllm_templates() -> dict[str, Template_]:
    """vLLM's: C13, C14, C15 (`reports.repro.engine_sets`)."""
    from deferlab.reports.repro import served as repro_served

    return {
        "C13": Template_(repro_served.C13, functools.partial(repro_served.fit_c13, engine="vllm"), _GEOMETRY),
        "C14": Template_(repro_served.C14, functools.partial(repro_served.fit_c14, engine="vllm"), _SERVED),
        "C15": Template_(repro_served.VLLM_C15, repro_served.fit_vllm_c15, TEMPLATES["C15"].what),
    }


@functools.cache
def templates(engine: str) -> dict[str, Template_]:
    """Claim -> template for ``engine``, as its plugin's reproducers give them (`reports.repro.engines`; SGLang's:
    `TEMPLATES` plus C9, C13, C14; vLLM's: C13, C14, C15); ValueError for an engine with none."""
    made = repro_of(engine).templates
    if made is None:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    return made()


def render(
    cid: str, counterexample: Any, failure: str, *, engine: str = "sglang", row: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """(the test's code, what it reproduces) for claim ``cid`` on ``engine``, or None when no template fits: a model
    family's column (and vLLM's C4) takes `reports.repro.families`' templates, Kimi-K3's the ones here."""
    from deferlab.reference.system.systems import DEFAULT_FAMILY
    from deferlab.reports.repro import families

    column = families.Column.of(row or {}, engine)
    made = families.render(cid, counterexample, failure, engine, row or {})
    if made is not None or column.family != DEFAULT_FAMILY:
        return None if made is None else made[:2]
    template = templates(engine).get(cid)
    values = template.fit(counterexample, failure, row or {}) if template else None
    if template is None or values is None:
        return None
    return Template(template.text).substitute(values, cid=cid.lower()).lstrip("\n"), template.what
