"""The claims registry (``claims.toml``), its one parser, and the verdicts document the suite writes.

Why here: the property suite records verdicts against these claims and the
CLI (``reports``) reads them back; both must agree on the claim ids, on the
verdict vocabulary and on the ``verdicts.json`` schema without the CLI
importing the test package. So the registry is parsed in one place, strictly
(a typo in the TOML fails loudly instead of recording nonsense), and the
claim ids always come from the file, never from a hard-coded list.

Real engines: a claim may carry ``[claim.engines]``, one verdict per released
range of an engine (``"vllm 0.32.0-0.33.0" = "fails"``, ends inclusive, or one
version ``"vllm 0.33.0"``), derived from the semantics like ``expected``; a
range expected to fail names how in ``[claim.failure]`` under the same key.
`expected_for_engine` answers for a loaded release.

Schema of ``verdicts.json`` (``schema_version`` 3; 1 and 2 are still read)::

    {"schema_version": 3, "generated_at": ISO-8601, "profile": str, "impl": str, "system": dict | None,
     "family": str, "strict": bool,
     "claims": [{"id", "statement", "source", "policy", "verdict", "evidence", "counterexample", "provenance",
                 "signatures": [{"signature", "partition", "counterexample", "error", "documented"?}],
                 "figure"?: {"kind", ...}, "impact"?: {...},
                 "column": {"family", "label", "engine", "release", "path"},
                 "counterexample_input": {"kind", "arguments", "blob"?} | None}],
     "properties": [{"name", "examples", "outcome", "seconds", "message", "claim"?}]}

Version 2 added the run's model ``family`` (semantics §18; a file without it is Kimi-K3's), each test's ``message`` (a failed or erroring test's failure line, a skip's reason, as the
recorder saw the test's report: nobody reads pytest's output for it) and ``strict`` (whether the run failed
a claim test on a failure its pattern does not name, semantics §17.1). Version 3 added, beside each row's
``policy`` and ``counterexample`` (unchanged), the column as a structure and the counterexample's kind and
arguments (`reference.system.rows`, whose `Row` reads a row of any of the three), and each claim test's
``claim`` (its ``claim`` marker, `properties.suite`), so no reader takes it from the test's name.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.releases import in_range
from deferlab.reference.system.rows import Column, Counterexample, Row, Verdict
from deferlab.reference.system.systems import DEFAULT_FAMILY, LABELS, release_key

CLAIMS_PATH = Path(__file__).resolve().with_name("claims.toml")
# "n/a": the implementation has no such feature (e.g. no deferred path before the PR), so the claim cannot apply.
VERDICTS = ("holds", "fails", "holds-with-caveat", "n/a", "not-run")
SCHEMA_VERSION = 3  # of verdicts.json
READABLE_SCHEMAS = (1, 2, 3)  # what `load_results` reads (1: before failure lines and ``strict``; 2: before the
# typed column and counterexample, `reference.system.rows`)
RESULTS_FILE = "verdicts.json"
ENGINES = tuple(LABELS)  # the real systems an ``[claim.engines]`` key may name
# "[FAMILY ]ENGINE[:PATH] LOW[-HIGH]": a family other than the default (Kimi-K3), and a served path other than the
# engine's default one (e.g. vLLM's host-normalized row), are named; the default's rows name neither.
_ENGINE_KEY = re.compile(
    r"^(?:([a-z0-9][a-z0-9.\-]*) )?([a-z]+)(?::([a-z][a-z\-]*))? (\d+(?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?$"
)
_ROOT = Path(__file__).resolve().parents[2]  # the checkout, or the installed ``deferlab`` package folder


def default_results_dir() -> Path:
    """Where verdicts go: ``$DEFERLAB_RESULTS_DIR``; else ``properties/results`` in a source checkout; else
    ``./deferlab-results`` (an installed package never writes into site-packages)."""
    env = os.environ.get("DEFERLAB_RESULTS_DIR")
    if env:
        return Path(env)
    if (_ROOT / "pyproject.toml").is_file():
        return _ROOT / "properties" / "results"
    return Path.cwd() / "deferlab-results"


RESULTS_DIR = default_results_dir()


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
    engines: tuple[EngineRange, ...] = ()


@dataclass(frozen=True)
class EngineRange:
    """One ``[claim.engines]`` row: the releases ``low``..``high`` (inclusive) of ``engine`` serving ``family``
    on its ``path`` (None: the engine's default served path), and their verdict."""

    key: str
    engine: str
    low: str
    high: str
    verdict: str
    family: str = DEFAULT_FAMILY
    path: str | None = None

    def covers(self, engine: str, version: str, family: str = DEFAULT_FAMILY, path: str | None = None) -> bool:
        """Whether ``version`` of ``engine`` serving ``family`` on ``path`` is in this range, in release order
        (`systems.release_key`); a spec that is not a release (a checkout, ``installed``) never is."""
        same = (engine, family, path) == (self.engine, self.family, self.path)
        return same and in_range(version, self.low, self.high)  # closed: a checkout sorts after it (releases.in_range)


def parse_engine_key(key: str) -> tuple[str, str, str, str, str | None]:
    """``"vllm 0.27.0-0.31.0"`` -> ("vllm", "0.27.0", "0.31.0", "kimi-k3", None); ``"qwen3-vl vllm:host-normalized
    0.34.0"`` -> ("vllm", "0.34.0", "0.34.0", "qwen3-vl", "host-normalized"); ValueError saying what is accepted."""
    m = _ENGINE_KEY.match(key)
    accepted = (
        f"'[FAMILY ]ENGINE[:PATH] VERSION' or '... LOW-HIGH' with ENGINE one of {ENGINES}, FAMILY one of "
        f"{tuple(FAMILIES)} and dotted-integer versions"
    )
    if m is None or m.group(2) not in ENGINES or (m.group(1) is not None and m.group(1) not in FAMILIES):
        raise ValueError(f"engine key {key!r}: accepted {accepted}")
    low, high = m.group(4), m.group(5) or m.group(4)
    if release_key(low) > release_key(high):
        raise ValueError(f"engine key {key!r}: the range is empty ({m.group(4)} is after {m.group(5)})")
    return m.group(2), low, high, m.group(1) or DEFAULT_FAMILY, m.group(3)


def _engine_ranges(path: Path, cid: str, table: dict[str, Any], failures: dict[str, str]) -> tuple[EngineRange, ...]:
    """The validated ``[claim.engines]`` rows of claim ``cid``: known engines, non-empty and disjoint ranges."""
    rows: list[EngineRange] = []
    for key, verdict in table.items():
        try:
            engine, low, high, family, served = parse_engine_key(key)
        except ValueError as e:
            raise ValueError(f"{path}: claim {cid} [claim.engines]: {e}") from None
        if verdict not in VERDICTS:
            raise ValueError(f"{path}: claim {cid} expects {verdict!r} for {key!r}; accepted: {VERDICTS}")
        if verdict == "fails" and key not in failures:
            raise ValueError(f"{path}: claim {cid} expects 'fails' for {key!r} but names no [claim.failure]")
        for other in rows:
            same = (other.engine, other.family, other.path) == (engine, family, served)
            if same and release_key(low) <= release_key(other.high) and release_key(other.low) <= release_key(high):
                raise ValueError(f"{path}: claim {cid} [claim.engines]: {key!r} overlaps {other.key!r}")
        rows.append(EngineRange(key, engine, low, high, verdict, family, served))
    return tuple(rows)


def load_claims(path: Path = CLAIMS_PATH) -> dict[str, Claim]:
    """The claims by id, in file order, validated so a typo in the TOML fails loudly instead of recording nonsense."""
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
        engines = _engine_ranges(path, raw["id"], dict(raw.get("engines", {})), failures)
        stray = [k for k in failures if k not in raw["expected"] and k not in {e.key for e in engines}]
        if stray:
            raise ValueError(f"{path}: claim {raw['id']} [claim.failure] names {stray}: no such policy or engine key")
        out[raw["id"]] = Claim(
            raw["id"], raw["statement"], raw["source"], raw["property"], dict(raw["expected"]), failures, engines
        )
    return out


def engine_range(
    claim: Claim, engine: str, version: str, family: str = DEFAULT_FAMILY, path: str | None = None
) -> EngineRange | None:
    """The ``[claim.engines]`` row covering ``version`` of ``engine`` serving ``family`` on ``path``, if any (rows
    of one engine, family and path are disjoint)."""
    return next((r for r in claim.engines if r.covers(engine, version, family, path)), None)


def expected_for_engine(
    claim_id: str,
    engine: str,
    version: str,
    claims: dict[str, Claim] | None = None,
    family: str = DEFAULT_FAMILY,
    path: str | None = None,
) -> str | None:
    """What claims.toml expects of release ``version`` of real ``engine`` (serving ``family`` on ``path``) for
    ``claim_id``; None when no row covers it (the verdict is then a finding, not checked). KeyError for an
    unknown claim or engine."""
    claims = load_claims() if claims is None else claims
    if engine not in ENGINES:
        raise KeyError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    row = engine_range(claims[claim_id], engine, version, family, path)
    return row.verdict if row is not None else None


_NAMED = re.compile(r"test_claim_(c\d+)_", re.IGNORECASE)  # the fallback: a claim test named after its claim


def claims_by_property(claims: dict[str, Claim] | None = None) -> dict[str, str]:
    """``property`` (``claims/test_gate.py::test_claim_c1_byte_rule``, relative to the shipped checks) -> claim
    id: how a collected test gets its ``claim`` marker when it carries none (`properties.suite`)."""
    if claims is None:
        return dict(_shipped_properties())
    return {c.property: c.id for c in claims.values()}


@functools.cache
def _shipped_properties() -> tuple[tuple[str, str], ...]:
    """The shipped claims.toml's (property, id) pairs, read once per process (a node lookup per test)."""
    return tuple((c.property, c.id) for c in load_claims().values())


def claim_of_node(node: str, claims: dict[str, Claim] | None = None) -> str | None:
    """The claim a test node id (``.../claims/test_gate.py::test_claim_c1_byte_rule[PR_33921]``) checks: the claim
    whose ``property`` it is, else (a test with no entry, e.g. a family's own C13) the claim its name carries;
    None for a test of no claim. A run's records carry the marker's claim instead (`reports.core.runner`)."""
    bare = str(node).split("[", 1)[0]
    for prop, cid in claims_by_property(claims).items():
        if bare == prop or bare.endswith("/" + prop):
            return cid
    m = _NAMED.search(bare.rsplit("::", 1)[-1])
    return m.group(1).upper() if m else None


def selection(claims: Iterable[str]) -> str:
    """pytest's ``-k`` expression selecting the tests of ``claims`` by the name every claim test carries
    (``test_claim_c14_...``; ``-m`` cannot match a marker's argument), for a child run of some claims."""
    return " or ".join(f"test_claim_{c.lower()}_" for c in claims)


def claim_ids(path: Path = CLAIMS_PATH) -> tuple[str, ...]:
    """The claim ids of ``claims.toml``, in file order (the one list of claims)."""
    return tuple(load_claims(path))


def merge(
    parts: Iterable[dict[str, Any]],
    *,
    profile: str,
    impl: str,
    claims: dict[str, Claim] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    labels: Sequence[str] | None = None,
    strict: bool = False,
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
    family = next((p["family"] for p in parts if p.get("family")), DEFAULT_FAMILY)
    recorded: dict[tuple[str, str], dict[str, Any]] = {}
    properties: list[dict[str, Any]] = []
    for part in parts:
        for entry in part.get("claims", []):
            recorded[(entry["id"], entry["policy"])] = entry
        properties.extend(part.get("properties", []))
    rows: list[dict[str, Any]] = []  # `Row.to_dict`: the old keys as they were, then schema 3's typed ones
    if labels is None:
        keys = {(cid, pol) for cid, c in claims.items() for pol in c.expected} | set(recorded)
    else:
        keys = {(cid, pol) for cid in claims for pol in labels} | set(recorded)
    order = list(claims)
    for cid, pol in sorted(keys, key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[1])):
        claim = claims.get(cid)
        entry = recorded.get((cid, pol), {"verdict": "not-run", "evidence": "no test recorded it in this run"})
        typed, ce = entry.get("counterexample_input"), entry.get("counterexample")
        row = Row(
            id=cid,
            column=Column.parse(pol),
            verdict=Verdict.parse(entry["verdict"]),
            evidence=entry.get("evidence", ""),
            statement=claim.statement if claim else "",
            source=claim.source if claim else "",
            counterexample=None if ce is None and not typed else Counterexample.from_dict(typed, ce),
            provenance=entry.get("provenance", {}),
            signatures=entry.get("signatures"),
            figure=entry.get("figure"),
            impact=entry.get("impact"),  # semantics §21.7
        )
        rows.append(row.to_dict())
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": now().isoformat(timespec="seconds"),
        "profile": profile,
        "impl": impl,
        "system": system,
        "family": family,
        "strict": bool(strict),
        "claims": rows,
        "properties": sorted(properties, key=lambda p: p["name"]),
    }


def read_json_file(path: Path, what: str, missing: str) -> Any:
    """The parsed JSON in ``path``; ValueError ``missing`` when it is no file, or naming ``what`` and the parse error."""
    if not path.is_file():
        raise ValueError(missing)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} {str(path)!r} is not valid JSON: {e}") from None


def load_results(results_dir: str | Path) -> dict[str, Any]:
    """The parsed ``verdicts.json`` in ``results_dir``; ValueError naming the file when it is missing or malformed."""
    path = Path(results_dir) / RESULTS_FILE
    missing = f"no results file {str(path)!r}: run the property suite first (scripts/test.sh)"
    data = read_json_file(path, "results file", missing)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ValueError(f"results file {str(path)!r} has no 'claims' list (schema_version {SCHEMA_VERSION} expected)")
    if data.get("schema_version") not in READABLE_SCHEMAS:
        raise ValueError(
            f"results file {str(path)!r} has schema_version {data.get('schema_version')!r}; "
            f"this deferlab reads {', '.join(map(str, READABLE_SCHEMAS))}"
        )
    return data
