"""``deferlab versions``: the claim verdicts of real engine releases side by side, and which model each matches.

Engines and their facts are the registry's (`reference.system.systems`). Each release runs once through the
one runner (`reports.core.runner`, in `reports.versions.cli`) for every model family asked (``--model``), and
gives a column per family and served path (`reports.versions.columns`): Kimi-K3's default path is the bare
release (``0.5.23``, ``vllm-0.34.0``), the others are named after it (``vllm-0.34.0 host-normalized``,
``qwen3-vl:vllm-0.34.0``). A claim a column's engine or family has no verdict for is ``n/a`` there; a family the
release does not serve has no column, its ``n/a`` reason in ``not_served``
(`reference.system.families.Family.not_served`).

``policy_match`` compares each SGLang release's Kimi-K3 verdicts with what claims.toml expects of each of
deferlab's modelled policies (the suite asserts the model gives exactly those): a release matching none is a
finding about the model. Every other column is matched against claims.toml's ``[claim.engines]`` rows for its
engine, release, family and path instead. A release that cannot be loaded gets its one-line error in
``errors`` (every claim ``n/a`` would be a lie), and has no column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from deferlab.impl.loader import wheels
from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.impact import Row, classify
from deferlab.reference.system.rows import Row as VerdictRow
from deferlab.reference.system.rows import Verdict
from deferlab.reference.system.signatures import signature_set
from deferlab.reference.system.systems import DEFAULT_FAMILY, at_least, column, column_key, sorted_releases
from deferlab.reference.system.systems import engine as engine_facts
from deferlab.reports.core import process
from deferlab.reports.core.claims import new_signatures, stand_ins_by_kind
from deferlab.reports.core.grouping import failure_text
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.sides import run_error, selected_families
from deferlab.reports.versions import columns as cols

SCHEMA_VERSION = 1  # of versions.json (the baseline's schema is `reports.core.baseline`'s)
ENGINE_MATCH = "claims.toml"  # the "policy" a vLLM release is matched against: its [claim.engines] rows
Capture = Callable[..., tuple[int | None, str, str]]


def index_versions(
    minimum: str | None = None, *, capture: Capture = process.capture, engine: str = "sglang"
) -> list[str]:
    """Every release of ``engine`` from ``minimum`` (default: its first release with the checked path,
    `EngineFacts.first_release`) on, in release order: the ones its plugin lists itself (`_listed_by_plugin`, no
    pip call), else the package index's (`impl.loader.wheels.index_versions`, the one pip listing deferlab has).
    Whether a release is in range is `reference.system.releases.in_range`'s one rule (`at_least`)."""
    facts = engine_facts(engine)
    minimum = minimum or facts.first_release
    listed = _listed_by_plugin(facts.hooks)
    if listed is None:
        try:
            listed = wheels.index_versions(facts.distribution, capture=capture)
        except wheels.IndexUnreadable as e:
            why = ((e.stderr or e.stdout).strip().splitlines() or [f"pip exited {e.rc}"])[-1][:400]
            raise RuntimeError(
                f"cannot list {engine} releases on the package index ({why}); name the versions instead"
            ) from None
    return sorted_releases(v for v in listed if at_least(v, minimum))  # releases only, from the first


def _listed_by_plugin(hooks: str) -> list[str] | None:
    """The releases an engine plugin lists itself (its ``hooks.releases()``, `EngineFacts.hooks`), or None: its
    releases are the package index's. Why: a plugin whose releases are not wheels on the index (trees it ships, a
    private mirror) is still run by ``versions``, and a named release it lacks is refused, without a pip call."""
    if not hooks:
        return None
    import importlib

    lister = getattr(importlib.import_module(hooks), "releases", None)
    return None if lister is None else [str(v) for v in lister()]


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
    release: dict[str, str],
    engine_name: str,
    version: str,
    registry: dict[str, claim_registry.Claim],
    family: str = DEFAULT_FAMILY,
    path: str | None = None,
) -> dict[str, Any]:
    """A column other than SGLang's Kimi-K3 against claims.toml's expectations for its release, family and served
    path: `policy_match`'s form, the one candidate being `ENGINE_MATCH` (claims with no row covering the column
    are findings, not compared)."""
    expected = {
        c: claim_registry.expected_for_engine(c, engine_name, version, registry, family=family, path=path)
        for c in release
    }
    # a claim the run did not reach (not-run: a claims subset, a run that stopped) is shown so, not a mismatch
    diffs = {
        c: {"release": v, ENGINE_MATCH: expected[c]}
        for c, v in release.items()
        if expected[c] not in (None, v) and v != "not-run"
    }
    return {"matches": [] if diffs else [ENGINE_MATCH], "closest": ENGINE_MATCH, "differences": diffs}


def name_of(record: RunRecord) -> str:
    """The release column of a run (`reference.system.systems.column`): its errors, seconds and system's key."""
    return column(record.system.engine, str(record.system.spec))


def served_columns(record: RunRecord) -> tuple[dict[str, list[VerdictRow]], dict[str, str]]:
    """(matrix column -> its rows, family -> the ``n/a`` line of each family asked that the release does not
    serve): the run's verdict columns of the families it asked, named as `reports.versions.columns` says."""
    engine_name, version = record.system.engine, str(record.system.spec)
    asked = selected_families(record.system.family)
    skipped = {f: why for f in asked if (why := cols.not_served(engine_name, version, f)) is not None}
    found: dict[str, list[VerdictRow]] = {}
    for label in record.columns():
        c = cols.of_label(engine_name, version, label)
        if c.family in asked and c.family not in skipped:
            found[c.name] = record.mine(label)
    return found, skipped


def _verdicts(c: cols.Column, rows: list[VerdictRow], ids: list[str], system: Any) -> dict[str, str]:
    got = {r.id: r.verdict.value for r in rows}
    return {cid: got.get(cid, "not-run") if system.answers(cid, c.family) else "n/a" for cid in ids}


def _text(row: VerdictRow) -> Any:
    """A row's counterexample as rows have always carried it (the described value; None: none recorded)."""
    return row.counterexample.text if row.counterexample is not None else None


def matrix(records: Sequence[RunRecord], profile: str, claims: Sequence[str] = ()) -> dict[str, Any]:
    """The ``versions.json`` document (columns in `columns.key` order: SGLang's releases, then vLLM's, in a
    release Kimi-K3 first); ``claims``: the claims the run asked for (default every claim of claims.toml)."""
    registry = claim_registry.load_claims()
    vectors = policy_vectors(registry)
    records = sorted(records, key=lambda r: column_key(name_of(r)))
    ids = [c for c in registry if not claims or c in claims]
    rows: dict[str, list[VerdictRow]] = {}
    per_run: dict[str, dict[str, str]] = {}
    meta: dict[str, cols.Column] = {}
    not_served: dict[str, dict[str, str]] = {}
    for r in records:
        found, skipped = served_columns(r)
        if skipped:
            not_served[name_of(r)] = skipped
        for name, mine in sorted(found.items(), key=lambda kv: cols.key(kv[0])):
            meta[name], rows[name] = cols.parse(name), mine
            per_run[name] = _verdicts(meta[name], mine, ids, r.system)

    def match(name: str) -> dict[str, Any]:
        c = meta[name]
        if engine_facts(c.engine).seam and c.family == DEFAULT_FAMILY and c.default:  # the modelled engine's column
            return policy_match(per_run[name], vectors)
        answered = {cid: v for cid, v in per_run[name].items() if cid in _answered(c, ids)}
        return engine_match(answered, c.engine, c.version, registry, c.family, c.path)

    ran = [r for r in records if any(meta[n].release == name_of(r) for n in per_run)]
    errors = {name_of(r): run_error(r.error, r.failed_tests(), r.mine(), r.test_claims) for r in records}
    failing = {n: [x for x in rows[n] if x.verdict is Verdict.FAILS] for n in per_run}
    doc = {
        "schema_version": SCHEMA_VERSION,
        "profile": profile,
        "versions": list(per_run),
        "releases": [name_of(r) for r in records],
        "families": [f for f in FAMILIES if any(f in selected_families(r.system.family) for r in records)],
        "columns": {n: meta[n].describe() for n in per_run},
        "not_served": not_served,
        "verdicts": {cid: {v: per_run[v][cid] for v in per_run} for cid in ids},
        "errors": {n: e for n, e in errors.items() if e},
        "policy_match": {n: match(n) for n in per_run},
        "seconds": {name_of(r): round(r.seconds, 1) for r in records},
        "systems": {name_of(r): _system_summary(r.described) for r in ran},
        "counterexamples": {n: {x.id: _text(x) for x in fs} for n, fs in failing.items()},
        "signatures": {n: {x.id: sorted(signature_set(x)) for x in fs} for n, fs in failing.items()},
        "new_signatures": {n: {x.id: new_signatures(x) for x in fs if new_signatures(x)} for n, fs in failing.items()},
        "evidence": {n: {x.id: x.evidence for x in rows[n]} for n in per_run},
        "provenance": {n: {x.id: x.provenance for x in rows[n]} for n in per_run},
        "figures": {n: {x.id: x.figure for x in rows[n] if x.figure} for n in per_run},
        # the impact numbers a failing cell's test measured (semantics §21.7)
        "impact": {n: {x.id: x.impact for x in fs if x.impact} for n, fs in failing.items()},
    }
    doc["severity"] = severities(doc)
    return doc


def severities(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """column -> claim -> the class of each failing cell (semantics §21.3), read off what the cell recorded.

    Why here: every output (versions.md, families.md, the PNG, the JUnit XML, ``--fail-on``) shows the same
    class, so it is computed once into the document; the failure line is the cell's own (`failure_text` of its
    evidence), the same text its failure group states."""
    out: dict[str, dict[str, str]] = {}
    for name in doc["versions"]:
        for cid, per in doc["verdicts"].items():
            if per.get(name) != "fails":
                continue
            evidence = str(doc.get("evidence", {}).get(name, {}).get(cid) or "")
            row = Row(
                claim=cid,
                column=name,
                failure=failure_text(evidence),
                evidence=evidence,
                signatures=tuple(doc.get("signatures", {}).get(name, {}).get(cid, ())),
                counterexample=doc.get("counterexamples", {}).get(name, {}).get(cid),
            )
            out.setdefault(name, {})[cid] = classify(row).label
    return out


def severity_of(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The document's ``severity`` (a document written before it was recorded: computed now)."""
    return doc["severity"] if "severity" in doc else severities(doc)


def _answered(c: cols.Column, ids: list[str]) -> set[str]:
    from deferlab.reference.system.systems import System

    system = System(c.engine, c.version)
    return {cid for cid in ids if system.answers(cid, c.family)}


def release_of(doc: dict[str, Any], name: str) -> str:
    """The release column of matrix column ``name`` (a document written before columns were recorded: itself)."""
    return str(doc.get("columns", {}).get(name, {}).get("release") or name)


def _system_summary(system: dict[str, Any] | None) -> dict[str, Any]:
    if not system:
        return {}
    keep = ("name", "version", "kind", "commit", "load_seconds")
    return {**{k: system.get(k) for k in keep}, "stand_ins_by_kind": stand_ins_by_kind(system)}
