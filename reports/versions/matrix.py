"""``deferlab versions``: the claim verdicts of real engine releases side by side, and which model each matches.

Engines and their facts are the registry's (`reference.system.systems`): SGLang's columns are named by the
bare version (``0.5.23``), vLLM's ``vllm-0.33.0``; vLLM answers the served-vs-trained claims C13-C15
(`EngineFacts.claims`), its other claims are about SGLang's PR and are ``n/a`` in its column. Each release
runs through the one runner (`reports.core.runner`, in `reports.versions.cli`); this module turns the runs'
records into the matrix (``versions.json``).

``policy_match`` compares each SGLang release's verdicts with what claims.toml expects of each of deferlab's
modelled policies (the suite asserts the model gives exactly those): a release matching none is a finding
about the model. A vLLM column is matched against claims.toml's ``[claim.engines]`` expectations for that
release instead. A release that cannot be loaded gets its one-line error in ``errors`` (every claim
``n/a`` would be a lie), and its column is left out of the verdicts.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.signatures import signature_set
from deferlab.reference.system.systems import at_least, column, column_key, sorted_releases, split_column
from deferlab.reference.system.systems import engine as engine_facts
from deferlab.reports.core import process
from deferlab.reports.core.claims import new_signatures, stand_ins_by_kind
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.sides import run_error

SCHEMA_VERSION = 1  # of versions.json (the baseline's schema is `reports.core.baseline`'s)
ENGINE_MATCH = "claims.toml"  # the "policy" a vLLM release is matched against: its [claim.engines] rows
Capture = Callable[..., tuple[int | None, str, str]]


def index_versions(
    minimum: str | None = None, *, capture: Capture = process.capture, engine: str = "sglang"
) -> list[str]:
    """Every release of ``engine`` on the package index from ``minimum`` (default: its first release with the
    checked path, `EngineFacts.first_release`) on, in release order (one pip call)."""
    minimum = minimum or engine_facts(engine).first_release
    cmd = [sys.executable, "-m", "pip", "index", "versions", engine, "--disable-pip-version-check"]
    rc, out, err = capture(cmd, timeout=300)
    m = re.search(r"Available versions:\s*(.+)", out or "")
    if rc != 0 or not m:
        why = ((err or out).strip().splitlines() or [f"pip exited {rc}"])[-1][:400]
        raise RuntimeError(f"cannot list {engine} releases on the package index ({why}); name the versions instead")
    found = [v.strip() for v in m.group(1).split(",") if v.strip()]
    return sorted_releases(v for v in found if at_least(v, minimum))


def policy_vectors(registry: dict[str, claim_registry.Claim] | None = None) -> dict[str, dict[str, str]]:
    """What each modelled policy gives per claim (claims.toml's expectations; the suite asserts the model gives them).

    ``registry``: the loaded claims.toml (default: load it).
    """
    table: dict[str, dict[str, str]] = {}
    for cid, claim in (registry if registry is not None else claim_registry.load_claims()).items():
        for pol, verdict in claim.expected.items():
            table.setdefault(pol, {})[cid] = verdict
    return table


def policy_match(release: dict[str, str], vectors: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Policies whose every verdict equals the release's, and for the closest policy the claims that differ."""
    ids = list(release)
    if not ids or all(v == "not-run" for v in release.values()):
        return {"matches": [], "closest": None, "differences": {}}
    diffs = {pol: [c for c in ids if vec.get(c) != release[c]] for pol, vec in vectors.items()}
    matches = sorted(p for p, d in diffs.items() if not d)
    closest = min(diffs, key=lambda p: (len(diffs[p]), p))
    return {
        "matches": matches,
        "closest": closest,
        "differences": {c: {"release": release[c], closest: vectors[closest].get(c)} for c in diffs[closest]},
    }


def engine_match(
    release: dict[str, str], engine_name: str, version: str, registry: dict[str, claim_registry.Claim]
) -> dict[str, Any]:
    """A non-SGLang release against claims.toml's expectations for it: `policy_match`'s form, the one candidate
    being `ENGINE_MATCH` (claims with no row covering the release are findings, not compared)."""
    expected = {c: claim_registry.expected_for_engine(c, engine_name, version, registry) for c in release}
    diffs = {c: {"release": v, ENGINE_MATCH: expected[c]} for c, v in release.items() if expected[c] not in (None, v)}
    return {"matches": [] if diffs else [ENGINE_MATCH], "closest": ENGINE_MATCH, "differences": diffs}


def name_of(record: RunRecord) -> str:
    """The matrix column of a run's release (`reference.system.systems.column`)."""
    return column(record.system.engine, str(record.system.spec))


def matrix(records: Sequence[RunRecord], profile: str, claims: Sequence[str] = ()) -> dict[str, Any]:
    """The ``versions.json`` document (columns in `column_key` order: SGLang's, then vLLM's); ``claims``: the
    claims the run asked for (default every claim of claims.toml)."""
    registry = claim_registry.load_claims()
    vectors = policy_vectors(registry)
    records = sorted(records, key=lambda r: column_key(name_of(r)))
    ids = [c for c in registry if not claims or c in claims]
    rows = {name_of(r): r.mine() for r in records}
    ok = [r for r in records if r.verdicts()]
    per_run = {
        name_of(r): {c: r.verdicts().get(c, "not-run") if r.system.answers(c) else "n/a" for c in ids} for r in ok
    }

    def match(r: RunRecord) -> dict[str, Any]:
        name = name_of(r)
        engine_name, version = split_column(name)
        if engine_name == "sglang":
            return policy_match(per_run[name], vectors)
        answered = {c: v for c, v in per_run[name].items() if r.system.answers(c)}
        return engine_match(answered, engine_name, version, registry)

    errors = {name_of(r): run_error(r.error, r.failed_tests(), rows[name_of(r)]) for r in records}
    failing = {n: [x for x in rows[n] if x.get("verdict") == "fails"] for n in per_run}
    return {
        "schema_version": SCHEMA_VERSION,
        "profile": profile,
        "versions": list(per_run),
        "verdicts": {cid: {v: per_run[v][cid] for v in per_run} for cid in ids},
        "errors": {n: e for n, e in errors.items() if e},
        "policy_match": {name_of(r): match(r) for r in ok},
        "seconds": {name_of(r): round(r.seconds, 1) for r in records},
        "systems": {name_of(r): _system_summary(r.described) for r in ok},
        "counterexamples": {n: {x["id"]: x.get("counterexample") for x in fs} for n, fs in failing.items()},
        "signatures": {n: {x["id"]: sorted(signature_set(x)) for x in fs} for n, fs in failing.items()},
        "new_signatures": {
            n: {x["id"]: new_signatures(x) for x in fs if new_signatures(x)} for n, fs in failing.items()
        },
        "evidence": {n: {x["id"]: x.get("evidence", "") for x in rows[n]} for n in per_run},
        "provenance": {n: {x["id"]: x.get("provenance", {}) for x in rows[n]} for n in per_run},
    }


def _system_summary(system: dict[str, Any] | None) -> dict[str, Any]:
    if not system:
        return {}
    keep = ("name", "version", "kind", "commit", "load_seconds")
    return {**{k: system.get(k) for k in keep}, "stand_ins_by_kind": stand_ins_by_kind(system)}
