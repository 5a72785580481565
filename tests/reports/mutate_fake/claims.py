"""The fake engine's claim tests: ``claims.py [NODE ...] --sglang TREE`` (or ``--collect-only``, ``--load``, ``--die``).

A stand-in for ``pytest <claim tests> --sglang TREE`` that honours what the campaign's plugin
(``deferlab.properties.probes``) does in a real session: the collection file, the probes' hits; it writes the
results file (schema 2, each test's failure line) where the runner reads it.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

NODES = {
    "C1": "fake/claims/test_fake.py::test_claim_c1_gate[SGLANG]",
    "C2": "fake/claims/test_fake.py::test_claim_c2_patches_fail[SGLANG]",
    "C3": "fake/claims/test_fake.py::test_claim_c3_patches[SGLANG]",
    "C4": "fake/claims/test_fake.py::test_claim_c4_countdown[SGLANG]",
}
# properties (no claim, no verdict): units P:test_scale_is_affine (two nodes, one skipped as CUDA-less runs skip
# theirs) and P:test_patches_never_hold (fails on the unmutated code: the reference drops it)
PROPERTIES = {
    "fake/claims/test_fake.py::test_scale_is_affine[cpu]": "scale",
    "fake/claims/test_fake.py::test_scale_is_affine[cuda]": "skip",
    "fake/claims/test_fake.py::test_patches_never_hold": "never",
}


def load_module(name, path):
    """The fake engine's module at ``path``, imported as ``name`` (this script's and ``claims_vllm.py``'s load)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(tree):
    return load_module("fake_gate", Path(tree) / "sglang" / "srt" / "gate.py")


def c1(g):
    ok = g.should_defer(1, 2) and not g.should_defer(3, 2)  # blind to the tie: raw == processed
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: the gate defers the wrong sizes")


def c2(g):  # fails on the unmutated code: its failure signature is what a mutant may change
    got = 1 / (g.patches(1, 1, 14) - 1) if g.patches(1, 1, 14) != 1 else None
    if got is None:
        return "fails", "AssertionError: patches(1, 1, 14) = 1, the claim says 0"
    return "fails", f"ValueError: a 1x1 image has {got} patch fractions"


def c3(g):
    ok = g.patches(28, 28, 14) == 4 and g.patches(29, 28, 14) == 6
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: patch counts differ")


def c4(g):
    return ("holds", "counted down") if g.countdown(3) == 0 else ("fails", "AssertionError: did not reach 0")


CLAIMS = {"C1": c1, "C2": c2, "C3": c3, "C4": c4}


def prop(kind, g):
    """A property's outcome: passed, failed (AssertionError) or skipped."""
    if kind == "skip":
        return "skipped"
    if kind == "never":
        assert g.patches(1, 1, 1) == 2, "a 1x1 image has one patch"
    else:
        assert g.scale(2, 3) == 7 and g.scale(0, 5) == 1, f"scale(2, 3) = {g.scale(2, 3)}"
    return "passed"


PROVENANCE = {
    "C1": {"defer_decisions": "real: sglang.srt.gate.should_defer"},
    "C2": {"patches": "real: sglang.srt.gate.patches"},
    "C3": {"patches": "real: sglang.srt.gate.patches"},
    "C4": {"countdown": "real: sglang.srt.gate.countdown; modelled: the rest"},
}


ROOTDIR = str(Path(__file__).resolve().parent)  # where the fake's node ids are "collected"


def collect(nodes):
    """What the plugin writes for a collection: the rootdir and the node ids."""
    Path(os.environ["DEFERLAB_MUTATE_COLLECT"]).write_text(json.dumps({"rootdir": ROOTDIR, "nodes": nodes}))
    return 0


def main(argv):
    if "--die" in argv:  # a claims process killed by a signal
        os.kill(os.getpid(), 9)
    tree = argv[argv.index("--sglang") + 1] if "--sglang" in argv else argv[argv.index("--load") + 1]
    if "--load" in argv:
        try:
            load(tree)
        except Exception as e:
            print(
                f"sglang source {tree!r}: importing gate failed inside SGLang: {type(e).__name__}: {e}", file=sys.stderr
            )
            return 3
        print("sglang-9.9.9")
        return 0
    if "--collect-only" in argv:
        return collect([*NODES.values(), *PROPERTIES])
    if os.environ.get("DEFERLAB_MUTATE_PROBES"):  # the reference run: record which functions ran
        from deferlab.properties.probes import install_probe

        install_probe()
    wanted = [c for c, n in NODES.items() if n in argv]
    rows, props, rc = [], [], 0
    try:
        g = load(tree)
    except Exception as e:
        g, rc = None, 1
        asked = [NODES[c] for c in wanted] + [n for n in PROPERTIES if n in argv]
        props = [{"name": n, "outcome": "failed", "seconds": 0.0, "message": f"{type(e).__name__}: {e}"} for n in asked]
    for cid in wanted if g is not None else []:
        try:
            verdict, evidence = CLAIMS[cid](g)
            outcome, message = "passed", ""
        except Exception as e:
            verdict, evidence, outcome, rc, message = "not-run", "", "failed", 1, f"{type(e).__name__}: {e}"
        if verdict != "not-run":
            rows.append(
                {
                    "id": cid,
                    "statement": "",
                    "source": "",
                    "policy": "SGLANG",
                    "verdict": verdict,
                    "evidence": evidence,
                    "counterexample": None,
                    "provenance": PROVENANCE[cid],
                }
            )
        props.append({"name": NODES[cid], "outcome": outcome, "seconds": 0.0, "message": message})
    for node in [n for n in PROPERTIES if n in argv] if g is not None else []:
        try:
            outcome, message = prop(PROPERTIES[node], g), ""
        except Exception as e:
            outcome, rc, message = "failed", 1, f"{type(e).__name__}: {e}"
        props.append({"name": node, "outcome": outcome, "seconds": 0.0, "message": message})
    if os.environ.get("DEFERLAB_MUTATE_PROBES"):
        from deferlab.properties.probes import write_hits

        write_hits(os.environ["DEFERLAB_MUTATE_PROBES"])
    results = Path(os.environ["DEFERLAB_RESULTS_DIR"])
    results.mkdir(parents=True, exist_ok=True)
    doc = {
        "schema_version": 2,
        "generated_at": "",
        "profile": "ci",
        "impl": "fake",
        "system": None,
        "claims": rows,
        "properties": props,
    }
    (results / "verdicts.json").write_text(json.dumps(doc))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
