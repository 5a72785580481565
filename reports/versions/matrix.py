"""``deferlab versions``: the claim verdicts of real engine releases side by side, and which model each matches.

Engines: SGLang (columns named by the bare version, ``0.5.23``) and vLLM
(``vllm-0.33.0``; ``pytest <suite>/claims/test_served.py --vllm VERSION``,
the served-vs-trained claims C13-C15; its other claims are about SGLang's
PR and are ``n/a``). A vLLM column is matched against claims.toml's
``[claim.engines]`` expectations for that release instead of a policy.

For each release, one subprocess loads that SGLang (one version per process:
its modules cannot be unloaded) and runs the claim tests through the seam
(``pytest <suite>/claims --sglang VERSION``), recording verdicts under the
label ``SGLANG`` (``VLLM`` for vLLM). A release that cannot be loaded (no Kimi-K3 processor, the
wheel cannot be fetched, an import fails inside SGLang) gets its one-line
error in ``errors`` and every claim ``n/a`` would be a lie, so its column is
left out of the verdicts and listed there instead.

``policy_match`` compares each release's verdicts with what claims.toml
expects of each of deferlab's modelled policies (the suite asserts the model
gives exactly those): a release matching none is a finding about the model.
A committed ``reports/versions_baseline.json`` turns a verdict change of a
release between runs into a regression (exit 1), and so does a failing claim
that fails in a new way (a failure signature absent from the baseline's set for
that release, `reference.system.signatures`), when both runs searched under the
derandomized ``ci`` profile (`reports.report.regressions.signatures_gated`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.seam import label_for
from deferlab.reference.system.signatures import signature_set
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.report import claims
from deferlab.reports.report.regressions import signature_changes, signatures_gated

MINIMUM = "0.5.17"
VLLM_MINIMUM = "0.27.0"  # the first vLLM release with a Kimi-K3 image path (semantics §16.1)
VLLM_PREFIX = "vllm-"
ENGINE_MINIMUM = {"sglang": MINIMUM, "vllm": VLLM_MINIMUM}
SERVED_CLAIMS = "claims/test_served.py"
BASELINE = Path(__file__).resolve().parents[1] / "versions_baseline.json"
SCHEMA_VERSION = 1


def last_line(text: str) -> str:
    """The last non-empty line of a message (where pip and Python put the reason); "" when there is none."""
    return (str(text).strip().splitlines() or [""])[-1]


def one_line(text: str) -> str:
    """`last_line`, trimmed, at most 400 characters: a release's error in the matrix."""
    return last_line(text).strip()[:400]


def version_key(v: str) -> tuple[int, ...]:
    """Release order for plain ``X.Y.Z[.W][.postN]`` versions (vLLM published 0.9.0.1 and 0.10.1.1); anything
    else sorts last."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?", v)
    if not m:
        return (10**6,)
    return tuple(int(g or 0) for g in m.groups())


def column(engine: str, version: str) -> str:
    """The matrix's column (and baseline key) of a release: ``0.5.23`` for SGLang, ``vllm-0.33.0`` for vLLM."""
    return version if engine == "sglang" else f"{VLLM_PREFIX}{version}"


def split_column(name: str) -> tuple[str, str]:
    """(engine, version) of a column name (`column`'s inverse)."""
    return ("vllm", name[len(VLLM_PREFIX) :]) if name.startswith(VLLM_PREFIX) else ("sglang", name)


def column_key(name: str) -> tuple[int, tuple[int, ...]]:
    """Column order: SGLang's releases, then vLLM's, each oldest first."""
    engine, version = split_column(name)
    return (0 if engine == "sglang" else 1, version_key(version))


def index_versions(minimum: str | None = None, *, runner: Any = subprocess.run, engine: str = "sglang") -> list[str]:
    """Every release of ``engine`` on the package index from ``minimum`` (default: the first one checked) on,
    oldest first (one pip call)."""
    minimum = minimum or ENGINE_MINIMUM[engine]
    proc = runner(
        [sys.executable, "-m", "pip", "index", "versions", engine, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    m = re.search(r"Available versions:\s*(.+)", proc.stdout or "")
    if proc.returncode != 0 or not m:
        why = one_line(proc.stderr or proc.stdout or f"pip exited {proc.returncode}")
        raise RuntimeError(f"cannot list {engine} releases on the package index ({why}); name the versions instead")
    found = [v.strip() for v in m.group(1).split(",") if v.strip()]
    return sorted((v for v in found if version_key(v) >= version_key(minimum)), key=version_key)


def claims_command(version: str, profile: str) -> list[str]:
    """The claim tests of the installed or checked-out suite, on real SGLang ``version``."""
    cmd = [sys.executable, "-m", "pytest", str(claims.suite_path() / "claims"), "-q", "-p", "no:cacheprovider"]
    cmd += [f"--hypothesis-profile={profile}", "--sglang", version]
    return cmd


def vllm_claims_command(version: str, profile: str) -> list[str]:
    """The served-vs-trained claim tests (C13-C15) on real vLLM ``version`` (one engine per pytest session)."""
    cmd = [sys.executable, "-m", "pytest", str(claims.suite_path() / SERVED_CLAIMS), "-q", "-p", "no:cacheprovider"]
    return [*cmd, f"--hypothesis-profile={profile}", "--vllm", version]


PREFLIGHT = (
    "import importlib, sys\n"
    "from deferlab.reference.system.errors import DeferlabInputError\n"
    "try:\n"
    "    load = importlib.import_module(f'deferlab.impl.{sys.argv[2]}.sources').load\n"
    "    s = load(sys.argv[1])\n"
    "except DeferlabInputError as e:\n"
    "    print(str(e).splitlines()[0] if str(e) else type(e).__name__, file=sys.stderr); sys.exit(3)\n"
    "print(s.name)\n"
)


def preflight(spec: str, *, timeout: float = 1200, engine: str = "sglang") -> str:
    """Load ``engine`` ``spec`` in a fresh process; its name, or `SGLangLoadError` with the driver's one-line
    reason."""
    proc = subprocess.run(
        [sys.executable, "-c", PREFLIGHT, spec, engine], capture_output=True, text=True, check=False, timeout=timeout
    )
    if proc.returncode != 0:
        raise SGLangLoadError(last_line(proc.stderr or "") or f"loading {engine} {spec!r} exited {proc.returncode}")
    return proc.stdout.strip().splitlines()[-1]


class SGLangLoadError(RuntimeError):
    """An engine could not be loaded (the message is the driver's one line: what was tried, what is accepted)."""


def only_claims(command: list[str], claim_ids: Sequence[str] | None) -> list[str]:
    """``command`` running only the tests of ``claim_ids`` (``-k test_claim_c4_ or ...``); all when None."""
    if not claim_ids:
        return command
    return [*command, "-k", " or ".join(f"test_claim_{c.lower()}_" for c in claim_ids)]


def run_version(
    version: str,
    profile: str,
    runs_dir: Path,
    log: TextIO,
    engine: str = "sglang",
    claim_ids: Sequence[str] | None = None,
    preflighted: bool = False,
) -> dict[str, Any]:
    """Preflight (unless the caller just did: ``preflighted``), then the claim tests on ``engine`` ``version``
    (only those of ``claim_ids`` when given): its verdicts, provenance, system and timing (``version`` in the
    result is the release's `column`)."""
    t0 = time.perf_counter()
    name = column(engine, version)
    out: dict[str, Any] = {"version": name, "engine": engine, "verdicts": {}, "error": None, "rows": [], "system": None}
    try:
        if not preflighted:
            preflight(version, engine=engine)
    except (SGLangLoadError, subprocess.TimeoutExpired) as e:
        out["error"] = one_line(str(e))
        out["seconds"] = round(time.perf_counter() - t0, 1)
        return out
    results = runs_dir / name
    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(results.resolve())}
    command = claims_command(version, profile) if engine == "sglang" else vllm_claims_command(version, profile)
    command = only_claims(command, claim_ids)
    proc = subprocess.run(command, env=env, stdout=log, stderr=log, check=False)
    label = label_for(engine)
    try:
        doc = claims.load_results(results)
    except ValueError as e:
        out["error"] = one_line(f"the claim tests recorded nothing (pytest exit {proc.returncode}): {e}")
    else:
        applies = None if engine == "sglang" else set(engine_claims(claim_registry.load_claims(), engine))
        if claim_ids:  # the session records every claim (not-run for those -k left out): keep the ones asked
            applies = set(claim_ids) if applies is None else applies & set(claim_ids)
        out["rows"] = [r for r in doc["claims"] if r["policy"] == label and (applies is None or r["id"] in applies)]
        out["verdicts"] = {r["id"]: r["verdict"] for r in out["rows"]}
        out["system"] = doc.get("system")
        if proc.returncode not in (0, 1):
            out["error"] = f"pytest exited {proc.returncode} (verdicts read from what it recorded)"
        elif proc.returncode == 1:
            out["error"] = "a claim test errored (see the log); the verdicts it recorded are kept"
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


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
    ids = sorted(release, key=lambda c: int(c[1:]) if c[1:].isdigit() else 10**6)
    if not ids or all(v in ("not-run",) for v in release.values()):
        return {"matches": [], "closest": None, "differences": {}}
    diffs = {pol: [c for c in ids if vec.get(c) != release[c]] for pol, vec in vectors.items()}
    matches = sorted(p for p, d in diffs.items() if not d)
    closest = min(diffs, key=lambda p: (len(diffs[p]), p))
    return {
        "matches": matches,
        "closest": closest,
        "differences": {c: {"release": release[c], closest: vectors[closest].get(c)} for c in diffs[closest]},
    }


ENGINE_MATCH = "claims.toml"  # the "policy" a vLLM release is matched against: its [claim.engines] rows


def engine_claims(registry: dict[str, claim_registry.Claim], engine: str) -> list[str]:
    """The claims claims.toml states expectations for on ``engine``'s releases (``[claim.engines]``)."""
    return [c for c, claim in registry.items() if any(r.engine == engine for r in getattr(claim, "engines", ()))]


def engine_match(
    release: dict[str, str], engine: str, version: str, registry: dict[str, claim_registry.Claim]
) -> dict[str, Any]:
    """A non-SGLang release against claims.toml's expectations for it: `policy_match`'s form, the one candidate
    being `ENGINE_MATCH` (claims with no row covering the release are findings, not compared)."""
    expected = {c: claim_registry.expected_for_engine(c, engine, version, registry) for c in release}
    diffs = {c: {"release": v, ENGINE_MATCH: expected[c]} for c, v in release.items() if expected[c] not in (None, v)}
    return {"matches": [] if diffs else [ENGINE_MATCH], "closest": ENGINE_MATCH, "differences": diffs}


def _verdicts_of(run: dict[str, Any], ids: list[str], applies: list[str]) -> dict[str, str]:
    """A run's verdict per claim: recorded, else ``not-run``; for vLLM, ``n/a`` for the claims about SGLang."""
    if run.get("engine", "sglang") == "sglang":
        return {c: run["verdicts"].get(c, "not-run") for c in ids}
    return {c: run["verdicts"].get(c, "not-run") if c in applies else "n/a" for c in ids}


def matrix(runs: list[dict[str, Any]], profile: str) -> dict[str, Any]:
    """The ``versions.json`` document (columns in `column_key` order: SGLang's, then vLLM's)."""
    registry = claim_registry.load_claims()
    vectors = policy_vectors(registry)
    runs = sorted(runs, key=lambda r: column_key(r["version"]))
    ok = [r for r in runs if r["verdicts"]]
    ids = list(registry)
    applies = engine_claims(registry, "vllm")
    per_run = {r["version"]: _verdicts_of(r, ids, applies) for r in ok}

    def match(r: dict[str, Any]) -> dict[str, Any]:
        engine, version = split_column(r["version"])
        if engine == "sglang":
            return policy_match(r["verdicts"], vectors)
        return engine_match({c: per_run[r["version"]][c] for c in applies}, engine, version, registry)

    return {
        "schema_version": SCHEMA_VERSION,
        "profile": profile,
        "versions": [r["version"] for r in ok],
        "verdicts": {cid: {v: per_run[v][cid] for v in per_run} for cid in ids},
        "errors": {r["version"]: r["error"] for r in runs if r["error"]},
        "policy_match": {r["version"]: match(r) for r in ok},
        "seconds": {r["version"]: r["seconds"] for r in runs},
        "systems": {r["version"]: _system_summary(r.get("system")) for r in ok},
        "counterexamples": {
            r["version"]: {x["id"]: x.get("counterexample") for x in r["rows"] if x["verdict"] == "fails"} for r in ok
        },
        "signatures": {
            r["version"]: {x["id"]: sorted(signature_set(x)) for x in r["rows"] if x["verdict"] == "fails"} for r in ok
        },
        "evidence": {r["version"]: {x["id"]: x.get("evidence", "") for x in r["rows"]} for r in ok},
        "provenance": {r["version"]: {x["id"]: x.get("provenance", {}) for x in r["rows"]} for r in ok},
    }


def _system_summary(system: dict[str, Any] | None) -> dict[str, Any]:
    if not system:
        return {}
    keep = ("name", "version", "kind", "commit", "load_seconds")
    return {**{k: system.get(k) for k in keep}, "stand_ins_by_kind": claims.stand_ins_by_kind(system)}


# --- the baseline ---------------------------------------------------------------------------------------------------
class Baseline(dict):
    """A versions baseline as `load_baseline` reads it: version -> claim -> verdict (the mapping itself), and
    ``signatures`` (version -> failing claim -> sorted signatures; releases of an older baseline have none) and
    the ``profile`` its searches ran under."""

    def __init__(
        self,
        verdicts: dict[str, dict[str, str]],
        signatures: dict[str, dict[str, list[str]]] | None = None,
        profile: str | None = None,
    ) -> None:
        super().__init__(verdicts)
        self.signatures = dict(signatures or {})
        self.profile = profile


def load_baseline(path: Path) -> Baseline:
    """version -> claim -> verdict, with its signature sets (`Baseline`); a ValueError naming the file when it is
    not a versions baseline. A baseline written before it carried signatures loads with none (verdicts only)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read versions baseline {str(path)!r}: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION or "verdicts" not in doc:
        raise ValueError(f"{str(path)!r} is not a versions baseline (schema_version {SCHEMA_VERSION} with 'verdicts')")
    signatures = doc.get("signatures", {})
    if not isinstance(signatures, dict):
        raise ValueError(f"versions baseline {str(path)!r}: 'signatures' must be an object")
    return Baseline(doc["verdicts"], signatures, doc.get("profile"))


def compare(doc: dict[str, Any], baseline: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """A regression per (release, claim) whose verdict changed; releases missing from either side are skipped.

    For a claim failing in both, each signature of this run absent from the baseline's set for that release
    is a regression too (``kind`` "signature") when both searched under one derandomized profile
    (`signatures_gated`); a vanished signature, or a new one under a random profile, is no regression: it is
    listed in ``doc["signature_notes"]`` (set here, written to versions.json). A baseline without signatures
    (a plain mapping, or one written before them) compares verdicts only.
    """
    regs: list[dict[str, str]] = []
    notes: list[str] = []
    pinned = getattr(baseline, "signatures", {}) or {}
    gated = signatures_gated(doc.get("profile"), getattr(baseline, "profile", None))
    for version in doc["versions"]:
        old = baseline.get(version)
        if old is None:
            continue
        for cid, per_version in doc["verdicts"].items():
            new = per_version.get(version, "not-run")
            if cid in old and old[cid] != new:
                regs.append({"kind": "verdict", "name": f"{version}/{cid}", "baseline": old[cid], "current": new})
            before = pinned.get(version, {}).get(cid)
            if before is None or new != "fails" or old.get(cid) != "fails":
                continue
            now = set(doc.get("signatures", {}).get(version, {}).get(cid, []))
            found, more = signature_changes(f"{cid} on {version}", now, set(before), gated=gated)
            regs += [
                {
                    "kind": "signature",
                    "name": f"{version}/{cid}",
                    "baseline": "fails",
                    "current": f"fails in a new way: {r['current']}",
                }
                for r in found
            ]
            notes += more
    doc["signature_notes"] = notes
    return regs


def baseline_document(doc: dict[str, Any], previous: dict[str, dict[str, str]] | None) -> dict[str, Any]:
    """The baseline after this run: this run's releases replace theirs (verdicts and signature sets), the others
    are kept as they were (an older baseline's releases keep verdict-only rows)."""
    verdicts = dict(previous or {})
    signatures = dict(getattr(previous, "signatures", {}) or {})
    for version in doc["versions"]:
        verdicts[version] = {cid: per[version] for cid, per in doc["verdicts"].items() if version in per}
        if version in doc.get("signatures", {}):
            signatures[version] = dict(sorted(doc["signatures"][version].items(), key=lambda kv: _claim_order(kv[0])))
        else:
            signatures.pop(version, None)
    ordered = dict(sorted(verdicts.items(), key=lambda kv: column_key(kv[0])))
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "profile": doc["profile"], "verdicts": ordered}
    if signatures:
        out["signatures"] = dict(sorted(signatures.items(), key=lambda kv: column_key(kv[0])))
    return out


def _claim_order(cid: str) -> tuple[int, str]:
    return (int(cid[1:]) if cid[1:].isdigit() else 10**6, cid)


def write_baseline(path: Path, doc: dict[str, Any], previous: dict[str, dict[str, str]] | None = None) -> None:
    """`baseline_document` written atomically; ``previous``: the baseline's verdicts if already read (else read here)."""
    if previous is None and Path(path).is_file():
        previous = load_baseline(path)
    write_text_atomic(path, json.dumps(baseline_document(doc, previous), indent=1) + "\n")
