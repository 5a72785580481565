"""Claim verdicts and property outcomes, recorded during a pytest run.

Why a recorder: a claim of the PR can be *false about the system* while the
suite is green. The claim tests find the counterexample with Hypothesis,
record ``fails`` plus the shrunk input here, and then assert the verdict the
semantics predict (``claims.toml``'s ``expected`` table). ``deferlab report``
reads the merged file, ``properties/results/verdicts.json``. A claim's row also
carries the set of distinct failure signatures its search found (``signatures``,
see `claimcheck.collect_failures`); `signature_set` reads it (a row written
before rows carried one: its evidence's `failure_signature`).

Under pytest-xdist every worker writes its own part file; the controller (or
the only process, without xdist) merges the parts at session end and writes
the result atomically (temp file + rename), so a reader never sees half a file.
The registry, the verdict vocabulary and the document's schema (`merge`) are
the description's, `reference.system.claims`, which the CLI reads too; they
are re-exported here for the suite (``verdicts.load_claims``, ``verdicts.Claim``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.claims import (
    CLAIMS_PATH,
    RESULTS_DIR,
    SCHEMA_VERSION,
    VERDICTS,
    Claim,
    default_results_dir,
    load_claims,
    merge,
)
from deferlab.reference.system.signatures import failure_signature, signature_set

__all__ = [
    "CLAIMS_PATH",
    "RECORDER",
    "RESULTS_DIR",
    "SCHEMA_VERSION",
    "VERDICTS",
    "Claim",
    "Recorder",
    "default_results_dir",
    "describe",
    "describe_value",
    "structure",
    "failure_signature",
    "load_claims",
    "merge",
    "merge_directory",
    "record_claim",
    "signature_set",
    "strict",
]


STRICT_ENV = "DEFERLAB_STRICT"


def strict() -> bool:
    """The strict switch (``DEFERLAB_STRICT=1``; the README's test command and CI set it): a claim test fails on a
    failure its ``claims.toml`` pattern does not name, after recording it (`claimcheck.assert_expected`)."""
    return os.environ.get(STRICT_ENV, "").strip() not in ("", "0")


def describe_value(value: Any) -> Any:
    """A JSON-able, readable form of a counterexample (images and tensors described, never crash)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): describe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe_value(v) for v in value]
    return describe(value)


def structure(value: Any) -> dict[str, Any] | None:
    """A counterexample's kind and arguments, for schema 3's ``counterexample_input`` (`reference.system.rows`):
    what a reproducer rebuilds the input from without reading `describe`'s text. JSON values (a claim's drawn
    parameters: ``["JPEG EXIF 2", 17, 11, 0]``) are ``arguments``; a small image or array, whose `describe` carries
    every byte, is ``image`` / ``array``; anything else is ``text`` (only the description is known)."""
    if value is None:
        return None
    if _native(value):
        args = {"args": list(value)} if isinstance(value, (list, tuple)) else {"value": value}
        return {"kind": "arguments", "arguments": value if isinstance(value, dict) else args}
    mode = getattr(value, "mode", None)
    if mode is not None and hasattr(value, "size") and hasattr(value, "info") and value.size[0] * value.size[1] <= 64:
        image = {"mode": mode, "size": list(value.size), "data": value.tobytes().hex()}
        if mode in ("P", "PA"):
            image["palette"] = bytes(value.getpalette() or []).hex()
        if "transparency" in value.info and _native(value.info["transparency"]):
            image["transparency"] = value.info["transparency"]
        return {"kind": "image", "arguments": image}
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and hasattr(value, "tolist"):
        small = getattr(value, "numel", lambda: getattr(value, "size", 99))()
        if isinstance(small, int) and small <= 64:
            kind = type(value).__module__.split(".")[0]
            array = {"module": kind, "dtype": str(dtype), "shape": list(shape), "values": value.tolist()}
            return {"kind": "array", "arguments": array}
    return {"kind": "text", "arguments": {}}


def _native(value: Any) -> bool:
    """Whether ``value`` is JSON as it stands (tuples as lists): nothing in it needs describing."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _native(v) for k, v in value.items())
    return isinstance(value, (list, tuple)) and all(_native(v) for v in value)


def describe(value: Any) -> str:
    """A short, faithful description of an input: PIL mode/size/info, array dtype/shape, else repr."""
    mode = getattr(value, "mode", None)
    if mode is not None and hasattr(value, "size") and hasattr(value, "info"):
        info = {k: v for k, v in value.info.items() if k == "transparency"}
        extra = ""
        if value.size[0] * value.size[1] <= 64:  # small enough to rebuild with Image.frombytes(mode, size, data)
            extra = f", data=bytes.fromhex({value.tobytes().hex()!r})"
            if mode in ("P", "PA"):
                extra += f", palette=bytes.fromhex({bytes(value.getpalette() or []).hex()!r})"
        return f"PIL.Image(mode={mode!r}, size={value.size}, info={info!r}{extra})"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        kind = type(value).__module__.split(".")[0]
        small = getattr(value, "numel", lambda: getattr(value, "size", 99))()
        body = f", values={value.tolist()!r}" if isinstance(small, int) and small <= 64 else ""
        return f"{kind}.{type(value).__name__}(dtype={dtype}, shape={tuple(shape)}{body})"
    text = repr(value)
    return text if len(text) <= 400 else text[:397] + "..."


@dataclass
class Recorder:
    """What this process saw: claim verdicts and property outcomes, written as one part file."""

    claims: list[dict[str, Any]] = field(default_factory=list)
    properties: list[dict[str, Any]] = field(default_factory=list)
    system: dict[str, Any] | None = None  # the code under test (set by the impl fixture for real code)
    family: str = "kimi-k3"  # the session's model family (``--model``)

    def record_claim(
        self,
        claim_id: str,
        policy: str,
        verdict: str,
        evidence: str,
        counterexample: Any = None,
        provenance: dict[str, str] | None = None,
        signatures: Sequence[dict[str, Any]] | None = None,
        figure: dict[str, Any] | None = None,
    ) -> None:
        """Record one verdict; the last record of a (claim, policy) pair wins at merge time.

        ``provenance`` maps each implementation method the claim's test called
        to what ran behind it (``"model"``, ``"real: ..."``, ``"modelled: why"``).
        ``signatures``: every distinct failure signature the claim's search found,
        ``{signature, partition, counterexample, error}`` each (`claimcheck.Failures.records`),
        written sorted by (partition, signature); None (a test that records no search) writes none,
        and `signature_set` then reads the row's evidence. ``figure``: the data a reader draws this verdict's
        picture from (``{"kind": ..., ...}``, JSON values; e.g. the video claims' frame strips, semantics §20).
        """
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        self.claims.append(
            {
                "id": claim_id,
                "policy": policy,
                "verdict": verdict,
                "evidence": evidence,
                "counterexample": describe_value(counterexample),
                "counterexample_input": structure(counterexample),
                "provenance": dict(provenance or {}),
                **({"signatures": _sorted_signatures(signatures)} if signatures is not None else {}),
                **({"figure": figure} if figure else {}),
            }
        )

    def attach_impact(self, claim_id: str, policy: str, impact: dict[str, Any]) -> None:
        """Add the §21.7 impact numbers to the last verdict recorded for (claim, policy): the claim's test measures
        them after its search, on a failing cell only (semantics §21.7). JSON values only."""
        for row in reversed(self.claims):
            if row["id"] == claim_id and row["policy"] == policy:
                row["impact"] = impact
                return
        raise ValueError(f"attach_impact: no verdict of {claim_id} under {policy} recorded in this process")

    def record_property(
        self, name: str, examples: int | None, outcome: str, seconds: float, message: str = "", claim: str | None = None
    ) -> None:
        """One test's outcome (``passed``, ``failed``, ``error``, ``skipped``) and, unless it passed, its failure
        line (or skip reason): what a caller reads instead of pytest's output; a claim test's ``claim`` (its
        marker), so no reader takes the claim from the test's name."""
        self.properties.append(
            {
                "name": name,
                "examples": examples,
                "outcome": outcome,
                "seconds": round(seconds, 3),
                "message": message,
                **({"claim": claim} if claim else {}),
            }  # fmt: skip
        )

    def write_part(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        payload = {"claims": self.claims, "properties": self.properties, "system": self.system, "family": self.family}
        return _atomic_write(directory / f"{name}.json", payload)


def _sorted_signatures(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [{**e, "counterexample": describe_value(e.get("counterexample"))} for e in entries]
    return sorted(rows, key=lambda e: (str(e.get("partition", "")), str(e["signature"])))


RECORDER = Recorder()


# What the claim tests call: record into this process's recorder (one signature, `Recorder.record_claim`'s).
record_claim = RECORDER.record_claim
attach_impact = RECORDER.attach_impact


def _atomic_write(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=1, sort_keys=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def merge_directory(
    parts_dir: Path,
    out_path: Path,
    *,
    profile: str,
    impl: str,
    labels: Sequence[str] | None = None,
    strict: bool = False,
) -> Path | None:
    """Merge every part file of ``parts_dir`` into ``out_path`` atomically, then remove the parts.

    A run that recorded no claim at all (say, one unit-test file) leaves an
    existing ``out_path`` alone and returns None: it has nothing to say, and
    overwriting would turn the last full run's verdicts into ``not-run``.
    """
    files = sorted(parts_dir.glob("*.json")) if parts_dir.is_dir() else []
    parts = [json.loads(f.read_text()) for f in files]
    recorded_any = any(part.get("claims") for part in parts)
    path: Path | None = None
    if recorded_any or not out_path.exists():
        path = _atomic_write(out_path, merge(parts, profile=profile, impl=impl, labels=labels, strict=strict))
    for f in files:
        f.unlink(missing_ok=True)
    if parts_dir.is_dir() and not any(parts_dir.iterdir()):
        parts_dir.rmdir()
    return path
