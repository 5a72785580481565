"""The impact numbers a finding can state from what its cells recorded (semantics §21.1, §21.4), and nothing else.

Why read text: a versions.json keeps a claim's evidence and failure as the sentences the claim test wrote
(``919 sizes differ``, ``2560 tokens != checkpoint's ... 256 tokens``, ``up to 255 levels off``, ``490 FP32 / 0
BF16 of 768``). Each number here is parsed from one of those sentences; a number the evidence does not hold is
reported as not measured, never estimated. The share of a realistic upload distribution a geometry finding hits
needs the whole set of differing sizes: only a document that records it gets the share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from deferlab.reference.system import realistic
from deferlab.reference.system.impact import Severity, bf16_counts
from deferlab.reports.findings.group import Finding, Member

_INT = r"(\d[\d,]*)"
_SWEPT = re.compile(r"exhaustive: " + _INT + r" sizes")
_DIFFER = re.compile(_INT + r" sizes differ")
_TOKENS = re.compile(r"(\d+) tokens != checkpoint's .*?(\d+) tokens")
_NEQ = re.compile(r": ([^:;]+?) != (?:the )?(checkpoint's|trained side's|trained) ([^;]+?)(?:;|$| also )")
_AFTER_BF16 = re.compile(r"(?:\d+) of (?:\d+) levels differ after BF16")
_LEVEL = re.compile(r"level (\d+) served, (\d+) trained")
_UNEXPLAINED = re.compile(_INT + r" of " + _INT + r" values unexplained \(" + _INT + r" differ")
_LEVELS = re.compile(r"up to (\d+) levels off")
_ULPS = re.compile(r"(\d+) ulps")
_FP32 = re.compile(_INT + r" of " + _INT + r" (?:values|levels) differ (?:from the checkpoint )?in FP32")
_FP32_SHORT = re.compile(_INT + r" FP32 / \d+ BF16 of " + _INT)
_CLASS = re.compile(r"^(?:AssertionError: )?\[([^\]]+)\]")
_EXC = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception)): (?=([^;)]*))")  # the message: a lookahead, so a
# nested exception inside an AssertionError's message is found too
# a one-sided crash the other way round: the engine serves, the checkpoint refuses
_TOOK = "took what the trained side refuses"
_PIECE = re.compile(r"[;,]\s+(?=\[[^\]]+\] )")  # where the next "[input] failure" of a text starts
_SIZE = re.compile(r"\[(\d+), (\d+)\]")
_PATCHES = re.compile(r"materialized \((\d+), [^)]*\), the true (\d+x\d+) image needs (\d+) patches")  # C11
_PLACED = re.compile(r"in the request \[([^\]]*)\], alone \[([^\]]*)\]")  # C10: each image's decision


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def _all(rx: re.Pattern[str], texts: Iterable[str]) -> list[re.Match[str]]:
    return [m for t in texts for m in rx.finditer(t)]


def expected_served(m: Member) -> tuple[str, str]:
    """What the checkpoint gives and what the engine serves at the member's counterexample, from its failure."""
    head = m.texts[0] if m.texts else m.row.failure
    if m.severity == Severity.CRASH:
        inner = [e for e in _EXC.finditer(head) if e.group(1) != "AssertionError"]
        said = f"{inner[0].group(1)}: {inner[0].group(2).strip()}" if inner else head.removeprefix("AssertionError: ")
        if _TOOK in head:  # the other way round: the exception is the checkpoint's refusal (semantics §21.1)
            return (
                f"refused ({said})",
                "taken and served (the engine serves an input the checkpoint's processor refuses)",
            )
        return "accepted and served (the checkpoint's processor takes it)", said
    if neq := _NEQ.search(head):
        return neq.group(3).strip(), neq.group(1).strip()
    if bf16 := _AFTER_BF16.search(head):
        return "bitwise equal after the cast to BF16", bf16.group(0)
    if level := _LEVEL.search(head):
        return f"level {level.group(2)}", f"level {level.group(1)}"
    if fp := _FP32.search(head) or _FP32_SHORT.search(head):
        return "bitwise the checkpoint's float32 values", fp.group(0)
    return "the checkpoint's (see the failure)", head


def realistic_share(recorded: set[tuple[int, int]], differing: int | None) -> str:
    """The share of `realistic.images()` (displayed sizes) among the differing sizes, when the document holds
    the whole set; otherwise why it is not measured."""
    if differing is None or len(recorded) < differing:
        return (
            f"not measured: the document records {len(recorded)} of the "
            f"{'?' if differing is None else f'{differing:,}'} differing sizes, not the set"
        )
    images = realistic.images()
    hit = sum(realistic.displayed(r) in recorded for r in images)
    return f"{hit:,} of {len(images):,} realistic images ({hit / len(images):.1%})"


VIDEO_CLAIMS = ("C16", "C17", "C18", "C19")


def _hit(m: Member) -> int:
    """The realistic inputs member ``m``'s finding affects: of a video cell, the clips both sides take
    (``both_take``): its one-sided refusals are counted too, and they are its crash finding's, not this one's."""
    r = m.row.impact["realistic"]
    return r.get("both_take", r["affected"])


def _share(members: list[Member]) -> str:
    """The share a finding states on one column, from its members there (representative first): the first's, or
    where that is a video claim the largest of its video claims' (a sampler's finding, C16 with C18, §21.4: its
    times may differ on clips whose frames agree, SGLang's Gemma 4 telling position / 24 s), naming the claim
    when there are several."""
    video = [m for m in members if m.claim in VIDEO_CLAIMS]
    clips = members[0].claim in VIDEO_CLAIMS
    m = max(video, key=_hit) if clips else members[0]  # max: the first of equal ones
    r, hit = m.row.impact["realistic"], _hit(m)
    what = "clips" if clips else "images"
    claim = f" in {m.claim}" if clips and len({v.claim for v in video}) > 1 else ""
    where = ", both sides taking them," if "both_take" in r else ""
    return f"{hit:,} of {r['of']:,} realistic {what} ({hit / r['of']:.1%}){claim}{where} on {m.column}"


def measured(f: Finding) -> dict[str, Any]:
    """The numbers its cells' tests measured (semantics §21.7), the representative's first, then each other cell's
    realistic share: what the finding states before anything read from text."""
    rep = f.representative()
    out: dict[str, Any] = {}
    if f.severity == Severity.CRASH:  # the cell's numbers count every way it differs: its other finding states them
        return out
    cells = sorted((m for m in f.members if m.row.impact), key=lambda m: m is not rep)
    comparable: dict[str, list[Member]] = {}  # column -> its members with a share to state, representative first
    for m in cells:
        r = m.row.impact.get("realistic")
        if r and r.get("of"):  # else nothing comparable (C14: the remade size's grid differs on every image)
            comparable.setdefault(m.column, []).append(m)
    shares = [(column, _share(members)) for column, members in comparable.items()]
    if shares:  # one line per distinct share, naming its columns (a loader shared by seven families: one line)
        same: dict[str, list[str]] = {}
        for column, text in shares:
            same.setdefault(text.rsplit(" on ", 1)[0], []).append(column)
        out["realistic"] = [f"{k} on {', '.join(v)}" if len(v) < 3 else f"{k} on each of {len(v)} columns ({', '.join(v)})"
                            for k, v in same.items()]  # fmt: skip
    missed = [f"{m.column}: {m.row.impact['not_measured']}" for m in cells if "not_measured" in m.row.impact]
    if missed:
        out["not_measured"] = missed
    for m in cells:
        imp = m.row.impact
        if "tokens" in imp and "realistic_tokens" not in out and "ratio_median" in imp["tokens"]:
            t = imp["tokens"]
            out["realistic_tokens"] = (
                f"served/trained tokens on the affected {'clips' if m.claim == 'C17' else 'images'}: median {t['ratio_median']:.2f}x (min "
                f"{t['ratio_min']:.2f}x, max {t['ratio_max']:.2f}x); {t['served_total']:,} served vs "
                f"{t['trained_total']:,} trained in all ({m.column})"
            )
        if "pixels" in imp and "pixels" not in out:
            p = imp["pixels"]
            psnr = "inf" if p["psnr_db"] == "inf" else f"{p['psnr_db']:.1f} dB"
            out["pixels"] = (
                f"{p['bf16_differ']:,} of {p['compared']:,} values differ in the tower's bf16 (largest "
                f"{p['max_bf16_ulps']:g} bf16 ulps); {p['differ']:,} in uint8 (largest {p['max_levels']} levels); "
                f"PSNR {psnr}; at {p.get('input', 'the minimal input')} ({m.column})"
            )
    return out


def measure(f: Finding) -> dict[str, Any]:
    """The finding's impact numbers: what its cells' tests measured (§21.7), then each number parsed from
    recorded text (absent when no member records it)."""
    texts = [t for m in f.members for t in m.texts]
    out: dict[str, Any] = measured(f)
    evidence = [m.row.evidence for m in f.members]
    swept, differ = _all(_SWEPT, evidence), _all(_DIFFER, evidence)
    if swept and differ:
        out["sizes"] = f"{_n(differ[0].group(1)):,} of {_n(swept[0].group(1)):,} swept sizes differ"
    rep = f.representative()
    if tokens := _TOKENS.search(rep.texts[0] if rep.texts else rep.row.failure):
        served, trained = int(tokens.group(1)), int(tokens.group(2))
        out["tokens"] = f"{served} served vs {trained} trained ({served / trained:.2f}x) at the minimal input"
    if (
        f.key[2] == "geometry" and f.severity != Severity.CRASH
    ):  # the cause (its members may show pixels too: C14 with C13)
        recorded = {(int(a), int(b)) for m in f.members for a, b in _SIZE.findall(m.row.evidence)}
        if isinstance(rep.row.counterexample, list) and len(rep.row.counterexample) == 2:
            recorded.add(tuple(rep.row.counterexample))  # type: ignore[arg-type]
        out.setdefault("realistic", realistic_share(recorded, _n(differ[0].group(1)) if differ else None))
    if levels := [int(m.group(1)) for m in _all(_LEVELS, texts)]:
        out["max_levels"] = max(levels)
    if ulps := [int(m.group(1)) for m in _all(_ULPS, texts)]:
        out["max_ulps"] = max(ulps)
    if unexplained := _all(_UNEXPLAINED, texts):
        worst_share = max(unexplained, key=lambda m: _n(m.group(1)) / _n(m.group(2)))
        out["unexplained"] = f"{worst_share.group(1)} of {worst_share.group(2)} values (worst cell and class)"
    classes = sorted({c.group(1) for m in f.members for t in m.texts if (c := _CLASS.match(t))})
    if classes and f.key[2] == "pixels":
        out["classes"] = classes
    if f.key[2] == "normalization":
        fp32 = _all(_FP32, texts) + _all(_FP32_SHORT, texts)
        if fp32:
            top = max(fp32, key=lambda m: _n(m.group(1)) / _n(m.group(2)))
            out["fp32_differ"] = f"{top.group(1)} of {top.group(2)}"
        out["bf16_differ_max"] = max((c for m in f.members for c in bf16_counts(m.row.evidence)), default=0)
    if patches := _all(_PATCHES, texts):  # C11: the owner materializes another patch count than the image's
        m = patches[0]
        got, need = int(m.group(1)), int(m.group(3))
        out["patches"] = f"{got} materialized vs {need} the {m.group(2)} image needs ({got / need:.2f}x)"
    if placed := _all(_PLACED, texts):  # C10: the decisions a request makes against each image alone
        together, alone = ([x.strip() for x in g.split(",")] for g in placed[0].groups())
        moved = sum(1 for a, b in zip(together, alone, strict=False) if a != b)
        out["placement"] = f"{moved} of {len(alone)} images decided otherwise in the request than alone"
    if f.severity == Severity.CRASH:  # each failure of a text is its own "[input] ..." piece
        raised: set[str] = set()
        refused: set[str] = set()
        for piece in (p for t in texts for p in _PIECE.split(t)):
            errors = {e.group(1) for e in _EXC.finditer(piece) if e.group(1) != "AssertionError"}
            (refused if _TOOK in piece else raised).update(errors or ({"a refusal"} if _TOOK in piece else ()))
        if raised or not refused:
            out["errors"] = sorted(raised) or ["a refusal or unclear error the claim test names"]
        if refused:  # the engine took these; the exceptions named are the checkpoint's
            out["takes"] = sorted(refused)
    return out
