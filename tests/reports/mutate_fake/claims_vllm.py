"""The fake vLLM's served claims: ``claims_vllm.py [NODE ...] --vllm TREE`` (or ``--collect-only``, ``--load``).

Rows are recorded under the ``VLLM`` label, as a ``--vllm`` session records them; the runner reads that
label's rows (the system's). The collection file and the probes as in ``claims.py``.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

NODES = {
    "C13": "fake/claims/test_served.py::test_claim_c13_served_geometry[VLLM]",
    "C14": "fake/claims/test_served.py::test_claim_c14_served_pixels[VLLM]",
    "C15": "fake/claims/test_served.py::test_claim_c15_served_normalization[VLLM]",
}
PROVENANCE = {
    "C13": {"geometry": "real: vllm.multimodal.served.tokens"},
    "C14": {"serve": "real: vllm.multimodal.served.to_level"},
    "C15": {"serve": "real: vllm.multimodal.served.normalize; config: the profile's"},
}


def load(tree):
    spec = importlib.util.spec_from_file_location("fake_served", Path(tree) / "vllm" / "multimodal" / "served.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def c13(s):
    ok = s.tokens(28, 28, 14) == 4 and s.tokens(10, 10, 14) == 1 and s.tokens(29, 14, 14) == 2
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: token counts differ")


def c14(s):  # fails on the unmutated code (the checkpoint wraps where vLLM clamps): its signature may change
    got = s.to_level(300)
    how = "clamps" if got == 255 else "wraps" if got == 44 else "moves"
    return "fails", f"AssertionError: the served level of 300 {how} (got {got})"


def c15(s):
    ok = s.normalize(255, 0.5, 0.5) == 1.0 and s.normalize(0, 0.5, 0.5) == -1.0
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: normalization differs")


CLAIMS = {"C13": c13, "C14": c14, "C15": c15}


def main(argv):
    from claims import collect

    tree = argv[argv.index("--vllm") + 1] if "--vllm" in argv else argv[argv.index("--load") + 1]
    if "--load" in argv:
        try:
            load(tree)
        except Exception as e:
            print(f"vllm source {tree!r}: importing served failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 3
        print("vllm-9.9.9")
        return 0
    if "--collect-only" in argv:
        return collect(list(NODES.values()))
    if os.environ.get("DEFERLAB_MUTATE_PROBES"):
        from deferlab.properties.probes import install_probe

        install_probe()
    rows, props, rc = [], [], 0
    s = load(tree)
    for cid in [c for c, n in NODES.items() if n in argv]:
        verdict, evidence = CLAIMS[cid](s)
        row = {"id": cid, "statement": "", "source": "", "policy": "VLLM", "verdict": verdict, "evidence": evidence}
        rows.append({**row, "counterexample": None, "provenance": PROVENANCE[cid]})
        props.append({"name": NODES[cid], "outcome": "passed", "seconds": 0.0, "message": ""})
    if os.environ.get("DEFERLAB_MUTATE_PROBES"):
        from deferlab.properties.probes import write_hits

        write_hits(os.environ["DEFERLAB_MUTATE_PROBES"])
    results = Path(os.environ["DEFERLAB_RESULTS_DIR"])
    results.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": 2, "generated_at": "", "profile": "ci", "impl": "vllm:fake", "system": None}
    (results / "verdicts.json").write_text(json.dumps({**doc, "claims": rows, "properties": props}))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
