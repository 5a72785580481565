"""The claims registry (``claims.toml``), its one parser, and the verdicts document the suite writes.

Why here: the property suite records verdicts against these claims and the
CLI (``reports``) reads them back; both must agree on the claim ids, on the
verdict vocabulary and on the ``verdicts.json`` schema without the CLI
importing the test package. So the registry is parsed in one place, strictly
(a typo in the TOML fails loudly instead of recording nonsense), and the
claim ids always come from the file, never from a hard-coded list.

Schema of ``verdicts.json`` (``schema_version`` 1)::

    {"schema_version": 1, "generated_at": ISO-8601, "profile": str, "impl": str, "system": dict | None,
     "claims": [{"id", "statement", "source", "policy", "verdict", "evidence", "counterexample", "provenance"}],
     "properties": [{"name", "examples", "outcome", "seconds"}]}
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CLAIMS_PATH = Path(__file__).resolve().with_name("claims.toml")
# "n/a": the implementation has no such feature (e.g. no deferred path before the PR), so the claim cannot apply.
VERDICTS = ("holds", "fails", "holds-with-caveat", "n/a", "not-run")
SCHEMA_VERSION = 1  # of verdicts.json
RESULTS_FILE = "verdicts.json"
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
        out[raw["id"]] = Claim(
            raw["id"], raw["statement"], raw["source"], raw["property"], dict(raw["expected"]), failures
        )
    return out


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
        raise ValueError(f"results file {str(path)!r} has no 'claims' list (schema_version 1 expected)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"results file {str(path)!r} has schema_version {data.get('schema_version')!r}; "
            f"this report reads {SCHEMA_VERSION}"
        )
    return data
