"""The fake vLLM's served claims: ``claims_vllm.py [NODE ...] --vllm TREE [--model FAMILY]`` (or
``--collect-only``, ``--load``).

Rows are recorded under the ``VLLM`` label, as a ``--vllm`` session records them; the runner reads that
label's rows (the system's). With ``--model FAMILY`` (not kimi-k3) the family's columns instead, as the family
claims record them: ``FAMILY:VLLM`` (its device path, ``fused_normalize``) and ``FAMILY:VLLM host-normalized``,
their provenance naming a companion's processor too (transformers', never a target). The collection file and
the probes as in ``claims.py``.
"""

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
    from claims import load_module  # run as a script beside claims.py (as `main` imports `collect`)

    return load_module("fake_served", Path(tree) / "vllm" / "multimodal" / "served.py")


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
COMPANION = "real: transformers transformers.models.qwen2_vl.image_processing_qwen2_vl.Qwen2VLImageProcessor.__call__"


def family_c15(s, device):
    norm = s.fused_normalize if device else s.normalize
    ok = all(norm(u, 0.5, 0.5) == (u / 255 - 0.5) / 0.5 for u in range(256))
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: [published config]: levels differ")


def family_c4(s):
    ok = all(round(s.fused_normalize(u, 0.5, 0.5), 2) == round(s.normalize(u, 0.5, 0.5), 2) for u in range(256))
    return ("holds", "no counterexample") if ok else ("fails", "AssertionError: levels differ after BF16")


def family_rows(family, s):
    """The family's columns: (node, row) per claim and column."""
    device, host = f"{family}:VLLM", f"{family}:VLLM host-normalized"
    out = []
    for column, is_device in ((device, True), (host, False)):
        norm = "fused_normalize" if is_device else "normalize"
        checks = {
            "C13": (c13(s), {"geometry": "real: vllm.multimodal.served.tokens"}),
            "C15": (
                family_c15(s, is_device),
                {"normalize": f"real: vllm.multimodal.served.{norm}", "serve": COMPANION},
            ),
        }
        if is_device:
            checks["C4"] = (family_c4(s), {"normalize": "real: vllm.multimodal.served.fused_normalize"})
        for cid, ((verdict, evidence), provenance) in checks.items():
            node = f"fake/claims/test_families.py::test_claim_{cid.lower()}_family[{column}]"
            out.append((node, {"id": cid, "policy": column, "verdict": verdict, "evidence": evidence,
                               "provenance": provenance}))  # fmt: skip
    return out


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
    family = argv[argv.index("--model") + 1] if "--model" in argv else None
    if "--collect-only" in argv:
        return collect([n for n, _ in family_rows(family, load(tree))] if family else list(NODES.values()))
    if os.environ.get("DEFERLAB_MUTATE_PROBES"):
        from deferlab.properties.probes import install_probe

        install_probe()
    rows, props, rc = [], [], 0
    s = load(tree)
    for node, row in family_rows(family, s) if family else []:
        if node in argv:
            rows.append({"statement": "", "source": "", "counterexample": None, **row})
            props.append({"name": node, "outcome": "passed", "seconds": 0.0, "message": ""})
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
