"""Failure signatures: when two failures of a claim are the same failure, and the set a verdict row records.

Why here (the shared description): the claim tests record a verdict's signature set
(`properties.claimcheck`), and the report's groups, its baseline gate, the versions
baseline and the mutation runner read it (`reports`); the test package may not be
imported by the CLI, so the one definition lives where both may import it.

The *signature* of a failure is its exception type and message with numbers, sizes,
versions, commits and memory addresses normalized (`normalize`), so two runs that
met the same flaw on different inputs agree, and a failure whose type or wording
changed does not; with a partition (the image class, call site or policy field the
failing input belongs to, named by the claim test) it is ``"[<partition>] <normalized>"``.
A verdict row's ``signatures`` lists every distinct one its search found
(`signature_set` reads it); a row recorded before rows carried one reads as the
signature of its evidence's failure (`failure_signature`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# "Type: message" as `properties.claimcheck` records a failure (an exception class name, a colon, a space).
_FAILURE = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Failure|Exit|Interrupt))\b: ")
# What follows the found failure in a recorded evidence: the other pinned inputs' failures (" also ...").
_ALSO = " also "
# A memory address, not the "0x12" inside a size such as 10x12.
_ADDRESS = re.compile(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]+")
# A git commit, as in a checkout's name (sglang-0.5.21+g1a2b3c4): 7-40 hex digits, at least one a-f and one 0-9;
# not the digits of a float's fraction and exponent (0.1754943508222875e-38).
_COMMIT = re.compile(r"(?<![0-9a-f.])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9a-z])(?![-+]\d)")
# Numbers (ints, floats, exponents, signs), versions such as 0.5.21 and sizes such as 8192x8192, but not digits
# inside names (float32, C3, kimi_k3).
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?:x\d+)*(?![A-Za-z_])")
# After `normalize`: a printed list, tuple, shape or array of values (numbers, booleans, None), or a bare run of
# numbers, whose length and nesting follow the input's size, not the flaw; read as one value, innermost first.
_VALUE = r"(?:#|True|False|None)"
_GROUP = re.compile(rf"[\[(]\s*{_VALUE}?(?:\s*,?\s*{_VALUE})*\s*,?\s*[\])]")
_RUN = re.compile(r"#(?:[\s,]+#)+")
MAX_SIGNATURE = 400  # characters of a signature kept (cut after normalizing, so equal failures stay equal)


def normalize(text: str) -> str:
    """``text`` with memory addresses, commits, numbers, versions and sizes replaced (``0x…``, ``<commit>``, ``#``)
    and whitespace collapsed: what differs between two runs that met the same flaw."""
    out = _ADDRESS.sub("0x…", str(text))
    out = _COMMIT.sub("<commit>", out)
    out = _NUMBER.sub("#", out)
    return " ".join(out.split())


def failure_text(evidence: str) -> str:
    """The found failure's "Type: message" in a recorded evidence; the whole evidence when it names no exception.

    A failing verdict's evidence is the claim's own text, the found failure and the other pinned inputs'
    failures (`properties.claimcheck.verify_claim`: "<evidence> <Type: message> also <input>: ..."). So: an
    exception that opens a sentence (not one quoted after a colon, which is a message's own cause or the claim
    text's example), the last such before the first " also " that follows one, up to that " also ".
    """
    text = str(evidence or "")
    opens = [m for m in _FAILURE.finditer(text) if not text[: m.start()].endswith(": ")]
    if not opens:
        return text.split(_ALSO, 1)[0].strip()
    cut = text.find(_ALSO, opens[0].start())
    head = text if cut < 0 else text[:cut]
    start = [m.start() for m in opens if m.start() < len(head)][-1]
    return head[start:].strip()


def failure_signature(evidence: str) -> str:
    """The failure's exception type + message, normalized (`normalize`): equal for the same flaw."""
    return normalize(failure_text(evidence))


def signature(error: str, partition: str = "") -> str:
    """The signature a claim search records for one failure: ``error`` ("Type: message", the message's first
    line) normalized, a printed array or tuple of numbers read as one ``#``, cut to `MAX_SIGNATURE`; prefixed
    ``[partition]`` when the claim names the part of its statement the input belongs to."""
    body, previous = normalize(error), None
    while body != previous:
        previous, body = body, _RUN.sub("#", _GROUP.sub("#", body))
    body = body[:MAX_SIGNATURE]
    return f"[{partition}] {body}" if partition else body


def signature_set(row: Mapping[str, Any]) -> frozenset[str]:
    """The distinct failure signatures of a verdict row (of ``verdicts.json``, a report's ``claims[]``, ...).

    A row with a ``signatures`` list: its entries' ``signature``. A row without one (recorded before rows carried
    it, or by a test that records no search): the `failure_signature` of its evidence when it ``fails``, else
    the empty set.
    """
    found = row.get("signatures")
    if isinstance(found, list) and found:
        return frozenset(str(s["signature"]) for s in found if isinstance(s, Mapping) and "signature" in s)
    if row.get("verdict") == "fails":
        return frozenset({failure_signature(str(row.get("evidence") or ""))})
    return frozenset()
