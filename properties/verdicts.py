"""Claim verdicts and property outcomes, recorded during a pytest run.

Why a recorder: a claim of the PR can be *false about the system* while the
suite is green. The claim tests find the counterexample with Hypothesis,
record ``fails`` plus the shrunk input here, and then assert the verdict the
semantics predict (``claims.toml``'s ``expected`` table). ``deferlab report``
reads the merged file, ``properties/results/verdicts.json``.

Under pytest-xdist every worker writes its own part file; the controller (or
the only process, without xdist) merges the parts at session end and writes
the result atomically (temp file + rename), so a reader never sees half a file.

Schema (``schema_version`` 1)::

    {"schema_version": 1, "generated_at": ISO-8601, "profile": str, "impl": str,
     "claims": [{"id", "statement", "source", "policy", "verdict", "evidence", "counterexample"}],
     "properties": [{"name", "examples", "outcome", "seconds"}]}
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLAIMS_PATH = HERE.parent / "reference" / "system" / "claims.toml"


def default_results_dir() -> Path:
    """Where verdicts go: ``$DEFERLAB_RESULTS_DIR``; else ``properties/results`` in a source checkout; else
    ``./deferlab-results`` (an installed package never writes into site-packages)."""
    env = os.environ.get("DEFERLAB_RESULTS_DIR")
    if env:
        return Path(env)
    if (HERE.parent / "pyproject.toml").is_file():
        return HERE / "results"
    return Path.cwd() / "deferlab-results"


RESULTS_DIR = default_results_dir()
SCHEMA_VERSION = 1
# "n/a": the implementation has no such feature (e.g. no deferred path before the PR), so the claim cannot apply.
VERDICTS = ("holds", "fails", "holds-with-caveat", "n/a", "not-run")


@dataclass(frozen=True)
class Claim:
    """One claim of ``claims.toml``: what it says, where it comes from, what each policy should give.

    ``failures`` maps each policy expected to fail to a regex the failure
    ("ExceptionType: message") must match, so an unrelated crash can never
    pass for the documented flaw.
    """

    id: str
    statement: str
    source: str
    property: str
    expected: dict[str, str]
    failures: dict[str, str] = field(default_factory=dict)


def load_claims(path: Path = CLAIMS_PATH) -> dict[str, Claim]:
    """The claims by id, validated so a typo in the TOML fails loudly instead of recording nonsense."""
    data = tomllib.loads(Path(path).read_text())
    out: dict[str, Claim] = {}
    for raw in data.get("claim", []):
        missing = [k for k in ("id", "statement", "source", "property", "expected") if k not in raw]
        if missing:
            raise ValueError(f"{path}: claim {raw.get('id', '?')!r} is missing {missing}")
        for pol, verdict in raw["expected"].items():
            if verdict not in VERDICTS and verdict != "any":
                raise ValueError(f"{path}: claim {raw['id']} expects {verdict!r} for {pol}; accepted: {VERDICTS}")
        failures = dict(raw.get("failure", {}))
        unexplained = [pol for pol, v in raw["expected"].items() if v == "fails" and pol not in failures]
        if unexplained:
            raise ValueError(
                f"{path}: claim {raw['id']} expects 'fails' for {unexplained} but names no [claim.failure]"
            )
        for pol, pattern in failures.items():
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"{path}: claim {raw['id']} failure pattern for {pol} is not a regex: {e}") from e
        out[raw["id"]] = Claim(
            raw["id"], raw["statement"], raw["source"], raw["property"], dict(raw["expected"]), failures
        )
    return out


def describe_value(value: Any) -> Any:
    """A JSON-able, readable form of a counterexample (images and tensors described, never crash)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): describe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe_value(v) for v in value]
    return describe(value)


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

    def record_claim(
        self,
        claim_id: str,
        policy: str,
        verdict: str,
        evidence: str,
        counterexample: Any = None,
        provenance: dict[str, str] | None = None,
    ) -> None:
        """Record one verdict; the last record of a (claim, policy) pair wins at merge time.

        ``provenance`` maps each implementation method the claim's test called
        to what ran behind it (``"model"``, ``"real: ..."``, ``"modelled: why"``).
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
                "provenance": dict(provenance or {}),
            }
        )

    def record_property(self, name: str, examples: int | None, outcome: str, seconds: float) -> None:
        self.properties.append({"name": name, "examples": examples, "outcome": outcome, "seconds": round(seconds, 3)})

    def write_part(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        payload = {"claims": self.claims, "properties": self.properties, "system": self.system}
        return _atomic_write(directory / f"{name}.json", payload)


RECORDER = Recorder()


def record_claim(
    claim_id: str,
    policy: str,
    verdict: str,
    evidence: str,
    counterexample: Any = None,
    provenance: dict[str, str] | None = None,
) -> None:
    """Record into this process's recorder (what the claim tests call)."""
    RECORDER.record_claim(claim_id, policy, verdict, evidence, counterexample, provenance)


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


def merge(
    parts: Iterable[dict[str, Any]],
    *,
    profile: str,
    impl: str,
    claims: dict[str, Claim] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One verdicts document from the part files; every (claim, expected policy) pair appears once.

    Pairs no test recorded become ``not-run``, so a partial run says what it
    did not check instead of leaving the reader to guess. ``labels`` replaces
    the expected policies (a real-code run is recorded under its one label).
    The document's ``system`` (the code that ran: version, commit, stand-ins)
    is the first part's that has one; only a real-code run's parts carry it.
    """
    claims = load_claims() if claims is None else claims
    parts = list(parts)
    system = next((p["system"] for p in parts if p.get("system")), None)
    recorded: dict[tuple[str, str], dict[str, Any]] = {}
    properties: list[dict[str, Any]] = []
    for part in parts:
        for entry in part.get("claims", []):
            recorded[(entry["id"], entry["policy"])] = entry
        properties.extend(part.get("properties", []))
    rows: list[dict[str, Any]] = []
    if labels is None:
        keys = {(cid, pol) for cid, c in claims.items() for pol in c.expected} | set(recorded)
    else:
        keys = {(cid, pol) for cid in claims for pol in labels} | set(recorded)
    order = list(claims)
    for cid, pol in sorted(keys, key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[1])):
        claim = claims.get(cid)
        entry = recorded.get((cid, pol), {"verdict": "not-run", "evidence": "no test recorded it in this run"})
        rows.append(
            {
                "id": cid,
                "statement": claim.statement if claim else "",
                "source": claim.source if claim else "",
                "policy": pol,
                "verdict": entry["verdict"],
                "evidence": entry.get("evidence", ""),
                "counterexample": entry.get("counterexample"),
                "provenance": entry.get("provenance", {}),
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": now().isoformat(timespec="seconds"),
        "profile": profile,
        "impl": impl,
        "system": system,
        "claims": rows,
        "properties": sorted(properties, key=lambda p: p["name"]),
    }


def merge_directory(
    parts_dir: Path,
    out_path: Path,
    *,
    profile: str,
    impl: str,
    labels: Sequence[str] | None = None,
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
        path = _atomic_write(out_path, merge(parts, profile=profile, impl=impl, labels=labels))
    for f in files:
        f.unlink(missing_ok=True)
    if parts_dir.is_dir() and not any(parts_dir.iterdir()):
        parts_dir.rmdir()
    return path
