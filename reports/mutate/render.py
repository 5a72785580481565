"""A mutation campaign's results: the document (mutate.json), its Markdown (mutate.md), the figure (mutate.png),
the person-judged equivalent survivors, and the CI baseline that turns a newly surviving mutant into a regression.

Why kept apart from running: the numbers are recomputed from the campaign's store
alone (`from_store`: a resumed or interrupted campaign renders the same way),
and equivalence is never decided here: a survivor is equivalent only when
``reports/mutate_equivalent.toml`` says so, with a person's reason.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deferlab.reference.system.systems import claim_key
from deferlab.reports.core import baseline, diff
from deferlab.reports.core.atomic import save_figure, write_text_atomic
from deferlab.reports.core.baseline import Baseline
from deferlab.reports.core.grouping import fenced
from deferlab.reports.mutate import anchor
from deferlab.reports.mutate.rates import DETECTED, interval, sampled, selection_saving, suspect_kills, wilson
from deferlab.reports.mutate.select import is_property
from deferlab.reports.mutate.store import Store

SCHEMA_VERSION = 2  # 2: a baseline's changed outcomes are all regressions (no separate improvements)
HERE = Path(__file__).resolve().parents[1]
EQUIVALENT = HERE / "mutate_equivalent.toml"
BASELINE = HERE / "mutate_baseline.json"

COLOURS = {"killed": "#4caf50", "killed at load": "#81c784", "timeout": "#ffb300", "survived": "#e53935",
           "equivalent": "#9e9e9e", "needs CUDA": "#bcaaa4", "error": "#5c6bc0"}  # fmt: skip
# The reviewed tables of the survivors file: an equivalent mutant changes nothing observable; a CUDA-only one
# changes a line only a CUDA tensor executes (a Triton launch), which no run on a CPU can reach: it is not
# equivalent, it is unmeasured here, and the kill rate is given with and without it.
TABLES = {"equivalent": "equivalent", "cuda_only": "needs CUDA"}


# --- the equivalent survivors (a person's judgement, committed) ------------------------------------------------------
def load_equivalent(path: Path | None = None) -> dict[str, dict[str, str]]:
    """id -> {reason, version?} from ``path`` (default `EQUIVALENT`): each ``[[equivalent]]`` entry needs an ``id``
    and a non-empty ``reason``."""
    path = path or EQUIVALENT
    if not Path(path).is_file():
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"equivalent-mutants file {str(path)!r} is not valid TOML: {e}") from None
    out: dict[str, dict[str, str]] = {}
    for table, kind in TABLES.items():
        for i, entry in enumerate(data.get(table, [])):
            stray = set(entry) - {"id", "reason", "version"}
            if stray or not str(entry.get("id", "")).strip() or not str(entry.get("reason", "")).strip():
                raise ValueError(
                    f"{path}: [[{table}]] entry {i + 1} needs a non-empty 'id' and 'reason' (and may give 'version')"
                    + (f"; unknown key(s) {sorted(stray)}" if stray else "")
                )
            out[str(entry["id"])] = {**{k: str(v) for k, v in entry.items() if k != "id"}, "kind": kind}
    return out


def equivalent_for(entries: dict[str, dict[str, str]], version: str, kind: str = "equivalent") -> dict[str, str]:
    """id -> reason for the ``kind`` entries (``equivalent`` or ``needs CUDA``) that apply to ``version`` (an entry
    without a version applies to all)."""
    return {
        i: e["reason"]
        for i, e in entries.items()
        if e.get("version") in (None, version) and e.get("kind", "equivalent") == kind
    }


# --- the baseline (CI's fixed sample) --------------------------------------------------------------------------------
def load_baseline(path: Path) -> Baseline:
    """The mutate baseline at ``path`` (schema 2, or the committed schema-1 file); ValueError naming the file."""
    found = baseline.load(path, "mutate")
    if not any(found.cells.values()):
        raise ValueError(f"{str(path)!r} is not a mutate baseline: it holds no mutant's outcome")
    return found


def baseline_ids(pinned: Baseline) -> set[str]:
    return {i for row in pinned.cells.values() for i in row}


def compare(doc: dict[str, Any], pinned: Baseline) -> list[dict[str, str]]:
    """The mutants whose outcome changed since the baseline (`reports.core.diff`: the mutant is the subject,
    its outcome the verdict; against a baseline every change is a regression). Mutants only one side has
    are not compared (another sample or seed)."""
    before = {(i, ""): diff.Cell(o) for row in pinned.cells.values() for i, o in row.items()}
    now = {(m["id"], ""): diff.Cell(_shown(m)) for m in doc["mutants"] if (m["id"], "") in before}
    changes = diff.diff({k: c for k, c in before.items() if k in now}, now)
    return [{"id": c.subject, "baseline": c.before, "current": c.after} for c in diff.regressions(changes)]


def write_baseline(path: Path, doc: dict[str, Any]) -> None:
    """The campaign's outcomes as the mutate baseline (schema 2), with what its sample depends on."""
    meta = {k: doc[k] for k in ("spec", "sample", "seed", "targets", "claims")}
    cells = {(m["id"], doc["spec"]): diff.Cell(_shown(m)) for m in doc["mutants"]}
    baseline.save(path, Baseline.of("mutate", cells, profile=doc["profile"], meta={**meta, "version": doc["system"].get("version")}))  # fmt: skip


def from_store(store: Store, entries: dict[str, dict[str, str]]) -> dict[str, Any]:
    """mutate.json's document from the campaign's store alone (its plan, reference, control, sessions, anchor and
    finished mutants) and the reviewed survivors ``entries`` (`load_equivalent`)."""
    plan, ref = store.get("plan"), store.get("reference") or {}
    wall, runs = store.sessions()
    plan.update(timing={"wall_seconds": wall, "reference_seconds": ref.get("wall_seconds", 0)}, runs=runs)
    plan["control"] = store.get("control")
    if store.get("anchor") is not None:
        plan["anchor"] = anchor.summary(store.get("anchor"))
    version = plan["system"]["version"]
    eq, cuda = equivalent_for(entries, version), equivalent_for(entries, version, "needs CUDA")
    return document(plan, store.records(), eq, cuda)


# --- the document ---------------------------------------------------------------------------------------------------
def _shown(m: dict[str, Any]) -> str:
    return "equivalent" if m.get("equivalent") else "needs CUDA" if m.get("cuda_only") else m["outcome"]


def document(
    plan: dict[str, Any],
    records: list[dict[str, Any]],
    equivalent: dict[str, str],
    cuda_only: dict[str, str] | None = None,
) -> dict[str, Any]:
    """mutate.json from the campaign plan, the per-mutant records and the reviewed survivors' reasons
    (equivalent; CUDA-only: unmeasured on a CPU)."""
    mutants = []
    for rec in sorted(records, key=lambda r: r["id"]):
        m = dict(rec)
        m["equivalent"] = equivalent.get(m["id"]) if m["outcome"] == "survived" else None
        on_cuda = (m.get("gpu_task") or {}).get("cuda") is True  # run on a GPU node: its outcome is measured
        m["cuda_only"] = (
            None if on_cuda or m["outcome"] != "survived" or m["equivalent"] else (cuda_only or {}).get(m["id"])
        )
        mutants.append(m)
    counts = Counter(_shown(m) for m in mutants)
    side = {"anchor_side_by_side": anchor.side_by_side(mutants, _shown)} if plan.get("anchor") else {}
    judged = len(mutants) - counts["equivalent"] - counts["error"] - counts["needs CUDA"]
    detected = sum(counts[o] for o in DETECTED)
    suspect = suspect_kills(plan.get("control"), mutants, _shown)
    judged, detected = judged - len(suspect), detected - len(suspect)  # a kill the control shares says nothing
    ctrl = plan.get("control") or {}
    if ctrl.get("outcome") in DETECTED and not ctrl.get("seen_by"):  # the control died with no unit named
        judged = 0  # no kill can be told from the harness's own failure: no rate
    per_unit = Counter(c for m in mutants for c in m.get("killed_by", []))
    matrix: dict[str, dict[str, Any]] = {}
    for m in mutants:
        row = matrix.setdefault(
            f"{m['file']}:{m['function']}:{m['line']}",
            {
                "where": f"{m['file']}:{m['function']}:{m['line']}",
                "mutants": 0,
                **dict.fromkeys(COLOURS, 0),
                "claims": {},
            },
        )
        row["mutants"] += 1
        row[_shown(m)] += 1
        for c in m.get("killed_by", []):
            row["claims"][c] = row["claims"].get(c, 0) + 1
    return {
        **plan,
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mutants": mutants,
        "counts": {o: counts[o] for o in COLOURS},
        "kill_rate": round(detected / judged, 4) if judged else None,
        "kill_rate_definition": "(killed + killed at load) / (mutants - equivalent - needs CUDA - error); a timeout "
        "is not a kill; a kill only by units the control's run changed too is counted in neither",
        "suspect_kills": suspect,
        "kill_rate_ci95": wilson(detected, judged) if judged and sampled(plan, mutants) else None,
        "kill_rate_with_cuda_only": round(detected / (judged + counts["needs CUDA"]), 4)
        if judged + counts["needs CUDA"]
        else None,
        "per_unit": {c: per_unit[c] for c in sorted(per_unit, key=claim_key)},
        "per_claim": {c: per_unit[c] for c in sorted(per_unit, key=claim_key) if not is_property(c)},
        "matrix": sorted(matrix.values(), key=lambda r: (r["where"].rsplit(":", 1)[0], int(r["where"].rsplit(":", 1)[1]))),
        "survivors": [m["id"] for m in mutants if _shown(m) == "survived"],
        "equivalent_but_detected": sorted(i for i in equivalent if any(m["id"] == i and m["outcome"] != "survived" for m in mutants)),
        "selection": selection_saving(mutants, plan.get("reference", {})),
        **side,
    }  # fmt: skip


# --- Markdown --------------------------------------------------------------------------------------------------------
def markdown(doc: dict[str, Any], regressions: list[dict[str, str]]) -> str:
    c, sel = doc["counts"], doc["selection"]
    ref = doc.get("reference", {})
    rate = "n/a" if doc["kill_rate"] is None else f"{100 * doc['kill_rate']:.1f} %"
    out = [f"# Mutation campaign: {doc['system'].get('name')} (profile `{doc['profile']}`, seed {doc['seed']})", ""]
    out += [
        f"{len(doc['mutants'])} mutants {'named by --mutants' if doc.get('mutants_asked') else 'sampled'} from a "
        f"population of {doc['population']} "
        f"(cosmic-ray's {doc['operators']} argument-free core operators in {len(doc['targets'])} targets; "
        f"{doc.get('incompetent', 0)} drawn mutants did not compile and were skipped).",
        "",
        f"**Kill rate {rate}**{interval(doc)}: killed {c['killed']}, killed at load {c['killed at load']}, timeout {c['timeout']}, "
        f"survived {c['survived']}, equivalent {c['equivalent']}, needs CUDA {c.get('needs CUDA', 0)}, error "
        f"{c['error']} ({doc['kill_rate_definition']})"
        + (
            f"; {100 * doc['kill_rate_with_cuda_only']:.1f} % counting the CUDA-only mutants as survivors."
            if c.get("needs CUDA") and doc.get("kill_rate_with_cuda_only") is not None
            else "."
        ),
        "",
        *_control_lines(doc),
        f"Time: {doc['timing']['wall_seconds']:.0f} s wall on {doc['jobs']} worker(s), reference run "
        f"{doc['timing']['reference_seconds']:.0f} s, {sel['campaign_selected_seconds']:.0f} mutant-seconds; "
        f"{sel['mean_claims_per_mutant']} units per mutant on average (of {len(units(ref))}: "
        f"{len(ref.get('verdicts', {}))} claims, {len(ref.get('properties', {}))} properties).",
        "",
        "![kill matrix](mutate.png)",
        "",
    ]
    if doc.get("first_kill"):
        out += ["Run with `--first-kill`: each mutant stopped at the first claim that saw it (quickest first), so the "
                "kills per claim count that first claim only.", ""]  # fmt: skip
    if sel.get("measured_mutants"):
        out += [
            f"Selection saving, measured on {sel['measured_mutants']} mutants run both ways: "
            f"{sel['selected_seconds']} s with selection vs {sel['all_claims_seconds']} s with every claim "
            f"(saving {100 * (sel['saving'] or 0):.0f} %); same outcome on {sel['same_outcome']}"
            + (f"; missed by selection: {', '.join(sel['missed_by_selection'])}" if sel["missed_by_selection"] else "")
            + ".",
            "",
        ]
    if doc.get("anchor_side_by_side"):
        out += anchor.markdown(doc)
    out += ["## Regressions against the baseline", ""]
    out += [f"- `{r['id']}`: {r['baseline']} -> {r['current']}" for r in regressions] or ["None."]
    out += [
        "",
        "## Kills per unit (claims and properties)",
        "",
        "A claim unit is its claim test (a kill: its verdict or failure signature changed, or its test broke); a "
        "property unit `P:<test>` is a `real_code` property with no verdict (a kill: a test of it that passed on "
        "the unmutated code failed or errored).",
        "",
        "| unit | reference | mutants it ran on | kills |",
        "|---|---|---|---|",
    ]
    ran = Counter(cl for m in doc["mutants"] for cl in (m.get("claims_run") or units(ref)))
    per_unit = doc.get("per_unit", doc["per_claim"])
    for cid in units(ref):
        out.append(f"| {cid} | {_reference_of(ref, cid)} | {ran[cid]} | {per_unit.get(cid, 0)} |")
    out += ["", "## Kill matrix (file:function:line)", ""]
    out += [
        "| where | mutants | killed | at load | timeout | survived | equivalent | killed by |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["matrix"]:
        by = ", ".join(f"{k} {n}" for k, n in sorted(row["claims"].items(), key=lambda kv: claim_key(kv[0])))
        out.append(
            f"| `{row['where']}` | {row['mutants']} | {row['killed']} | {row['killed at load']} | {row['timeout']} "
            f"| {row['survived']} | {row['equivalent']} | {by or '–'} |"
        )
    out += ["", "## Survivors", ""]
    for m in [m for m in doc["mutants"] if _shown(m) == "survived"]:
        out += _mutant_block(m, ref)
    if not doc["survivors"]:
        out.append("None.")
    out += ["", "## Equivalent survivors (reasons from reports/mutate_equivalent.toml)", ""]
    out += [f"- `{m['id']}`: {m['equivalent']}" for m in doc["mutants"] if m.get("equivalent")] or ["None."]
    cuda = [m for m in doc["mutants"] if m.get("cuda_only")]
    if cuda:
        out += ["", "## Survivors only a CUDA run can reach (reasons from reports/mutate_equivalent.toml)", ""]
        out += [f"- `{m['id']}`: {m['cuda_only']}" for m in cuda]
    if doc["equivalent_but_detected"]:
        out += [
            "",
            "Listed as equivalent but detected here (the entry is wrong): " + ", ".join(doc["equivalent_but_detected"]),
        ]
    other = [m for m in doc["mutants"] if m["outcome"] in ("timeout", "error")]
    if other:
        out += ["", "## Timeouts and harness errors", ""]
        out += [f"- `{m['id']}` {m['outcome']}: {'; '.join(m.get('reasons', {}).values())}" for m in other]
    out += ["", "## Targets", "", "| target | lines | mutants in the population |", "|---|---|---|"]
    out += [f"| `{t['target']}` | {t['start']}-{t['end']} | {t['population']} |" for t in doc["targets"]]
    return "\n".join(out) + "\n"  # fmt: skip


def _control_lines(doc: dict[str, Any]) -> list[str]:
    """The control (the unmutated tree run as a mutant) and how the runs ran (warm forks, cold ones and why)."""
    out = []
    ctrl = doc.get("control")
    if ctrl:
        seen = ", ".join(ctrl.get("seen_by") or []) or "no unit"
        out.append(
            f"Control: the unmutated tree, run as each mutant is ({ctrl.get('run')}), {ctrl['outcome']}"
            + ("" if ctrl["outcome"] == "survived" else f": outcome changed with nothing mutated in {seen}; "
               f"the {len(doc.get('suspect_kills', []))} kills by those units alone are suspect and not counted in the kill rate")
            + f" ({ctrl.get('seconds', 0):.0f} s)."
        )  # fmt: skip
    runs = doc.get("runs")
    if runs:
        cold = "; ".join(f"{n} x {why}" for why, n in runs.get("cold", {}).items())
        out.append(
            f"Runs: {runs.get('warm', 0)} forked from a warm interpreter" + (f", cold: {cold}" if cold else "") + "."
        )
    return [*out, ""] if out else []


def _mutant_block(m: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    """One survivor: where, which claims ran on it and their reference verdicts, and its diff."""
    ran = m.get("claims_run") or units(ref)
    seen = ", ".join(f"{c} ({_reference_of(ref, c)})" for c in ran)
    failing = [c for c in ran if ref.get("verdicts", {}).get(c) == "fails"]
    lines = [f"### `{m['id']}`", "", f"In `{m['function']}`; units run (reference): {seen}."]
    if failing:
        lines.append(
            f"Of these, {', '.join(failing)} already fail on the unmutated code: a failing claim that stops at its "
            "first counterexample cannot show a second way of failing."
        )
    return [*lines, "", *fenced(m.get("diff", "")).copy(), ""]


def units(ref: dict[str, Any]) -> list[str]:
    """A plan's reference units in claim order: its claims (with a verdict), then its passing properties."""
    return sorted([*ref.get("verdicts", {}), *ref.get("properties", {})], key=claim_key)


def _reference_of(ref: dict[str, Any], unit: str) -> str:
    """A unit's reference: a claim's verdict, or a property's test outcome."""
    if is_property(unit):
        return f"property {ref.get('properties', {}).get(unit, '?')}"
    return str(ref.get("verdicts", {}).get(unit, "?"))


# --- the figure ------------------------------------------------------------------------------------------------------
def figure(doc: dict[str, Any], path: Path) -> Path | None:
    """Outcomes per target function (stacked bars) beside kills per claim; None when no mutant ran."""
    if not doc["mutants"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_fn: dict[str, Counter] = {}
    for m in doc["mutants"]:
        per_fn.setdefault(f"{Path(m['file']).stem}:{m['function']}", Counter())[_shown(m)] += 1
    names = sorted(per_fn)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.32 * max(len(names), 8)), width_ratios=[2.2, 1])
    left = [0] * len(names)
    for outcome, colour in COLOURS.items():
        vals = [per_fn[n][outcome] for n in names]
        ax.barh(range(len(names)), vals, left=left, color=colour, label=outcome, edgecolor="white")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_yticks(range(len(names)), [n if len(n) < 60 else "…" + n[-58:] for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("mutants")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)  # beside the bars
    ax.set_title("Outcome per mutated function", fontsize=10)
    ids = units(doc["reference"])
    per_unit = doc.get("per_unit", doc["per_claim"])
    bx.barh(range(len(ids)), [per_unit.get(c, 0) for c in ids], color="#4caf50")
    labels = [f"{c if len(c) < 34 else c[:32] + '…'} ({_reference_of(doc['reference'], c)})" for c in ids]
    bx.set_yticks(range(len(ids)), labels, fontsize=8 if len(ids) <= 20 else 6)
    bx.invert_yaxis()
    bx.set_xlabel("mutants killed")
    bx.set_title("Kills per unit (reference)", fontsize=10)
    rate = "n/a" if doc["kill_rate"] is None else f"{100 * doc['kill_rate']:.1f} %"
    side = doc.get("anchor_side_by_side")
    if side and side["anchor_kill_rate"] is not None:  # the same sample against the checkout's own unit tests
        rate += f" (SGLang's unit tests: {100 * side['anchor_kill_rate']:.1f} %)"
    fig.suptitle(f"{doc['system'].get('name')}: {len(doc['mutants'])} mutants, kill rate {rate}", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def write(out: Path, doc: dict[str, Any], regressions: list[dict[str, str]]) -> None:
    """mutate.json, mutate.png and mutate.md into ``out``, each atomically (the results file stays beside them)."""
    body = {**doc, "regressions": regressions}
    write_text_atomic(out / "mutate.json", json.dumps(body, indent=1) + "\n")
    figure(doc, out / "mutate.png")
    write_text_atomic(out / "mutate.md", markdown(doc, regressions))
