"""Claim C9 on real SGLang counts and words: the simulator's IPC machine fed by `impl.sglang.ackcounts`.

One SGLang version loads per process, so each version runs in its own
subprocess (``RUNNER``), which prints JSON: the verdict rows of
``sim.ipc.verdicts`` for the CUDA IPC and the VMM pool, and a few raw answers
of the adapter. The expectations were derived from the code read in the
wheels before running anything (topology = (tp_size, attention-DP groups);
K_p the slot's words, K_c the owner's count after SGLang's clamp
``min(K_c, K_p)``; "releases" = what ``MultimodalInputs.release_features()``
does at request end on a rank whose item still holds the proxy):

* **0.5.23** (and 0.5.22): both pools take K_p = ``get_mm_feature_consumer_count()``
  = tp // dp with attention DP, else tp. The owner's loader passes no count,
  so K_c = 1: it writes word ``tp_rank % K_p`` (CUDA IPC: ``resolve_consumer_rank``;
  VMM: ``_acknowledgement_range``), its own attention-TP rank since DP groups
  are contiguous. Every other rank of the group releases its own word
  (``release_transport_proxies(1)``). Each word is written once per lease, by
  its own rank, and the slot frees only after the last one: nothing can land
  late, so whatever a late write would do, **all three properties hold** on both
  pools, every topology.
* **0.5.18**: K_p = ``server_args.tp_size`` (CUDA IPC) or
  ``configured_tp_size() // dp_size`` with attention DP (VMM). K_c =
  ``configured_tp_size()`` = tp, clamped to K_p: the owner writes every word
  after its copy. ``release_features()`` only drops the feature: **no
  releases**. Each lease is acknowledged once, after its only read: **all hold**
  on both pools. The single-ack path without a modulo (global tp_rank >= K_p
  raises) is never taken here: nobody acks one word, and the VMM proxy writes
  single words through its own ``_acknowledgement_range``
  (``attn_cp_rank * attn_tp_size + attn_tp_rank``), which never uses the global
  rank; so it does **not** break valid_ack under the VMM pool with attention DP.
* **0.5.21** (and 0.5.19, 0.5.20): as 0.5.18 (K_c = tp from ``get_parallel()``,
  clamped to K_p: the owner writes every word), **but** non-owners release
  their word at request end (0.5.19 through ``acknowledge_deferred_cuda_ipc_feature``,
  0.5.20+ through ``release_transport_proxies``). After the owner's whole-group
  ack frees the slot, a non-owner's release is a late write to a slot the
  next lease may already hold. CUDA IPC words hold generations: the late write
  stores the old one, erasing the next lease's ack of that word; if that lease
  was fully acked already, nothing rewrites it and the slot never frees:
  **liveness fails**, safety and valid_ack hold. VMM words are flags zeroed at
  publish: the late write counts for the next lease, which can free before
  its owner reads: **safety fails**, liveness and valid_ack hold. Smallest for
  both: tp 2, dp 1, two slots (the late release keeps the first item
  unfinished while the second reuses its slot), rank 1 the late releaser.
* **0.5.17**: no stream-ordered pool; the PR-era shared-memory counter pool,
  whose single row set runs on `sim.ipc.pool.CounterPool`: **all three hold**
  (derivation in `test_0_5_17_counter_pool_holds`).
"""

from __future__ import annotations

from typing import Any

from tests.impl.sglang.support import run_child

BUDGET = 20  # Hypothesis examples per cell; sim.ipc's exhaustive walk (depth 7) runs behind every "holds"
RUNNER = """
import json, sys
from deferlab.impl.sglang.ackcounts import AckRefused
from deferlab.impl.sglang.driver import SGLangImpl
from deferlab.sim.ipc import verdicts

src = SGLangImpl(sys.argv[1]).ack_source("all")
rows = verdicts(int(sys.argv[2]), policies=(src,))
out = {"rows": rows, "views": {}}
for t in src.transports:
    view = src.for_transport(t)
    try:
        words = view.acknowledge(1, 2, 3, tp_size=4, attn_dp_size=2)
        words = sorted(words) if isinstance(words, set) else words  # a counter pool gives the amount added
    except AckRefused as e:
        words = f"refused: {e}" if isinstance(e, ValueError) else "not a ValueError"
    out["views"][t] = {
        "name": view.name,
        "pool": view.pool,
        "idempotent_acks": view.idempotent_acks,
        "K_p tp4 dp2": view.producer_total(4, 2),
        "K_p tp4": view.producer_total(4, 1),
        "K_c tp4 dp2": view.requested(4, 2),
        "clamp 4 of 2": view.resolve(4, 2, None),
        "single ack rank 3, 2 words": words,
        "non_owner_release": view.non_owner_release,
        "late_acks": view.late_acks,
        "provenance": view.provenance(),
    }
print("JSON:" + json.dumps(out, default=str))
"""


def run_version(version: str) -> dict[str, Any]:
    """The runner's JSON for ``version`` (skips when the wheel is not cached and pip cannot fetch it)."""
    return run_child(RUNNER, version, str(BUDGET), spec=version)


def verdict_table(out: dict[str, Any], cells: int = 6) -> dict[tuple[str, str], tuple[str, tuple | None]]:
    """(pool, property) -> (verdict, (tp_size, attn_dp_size, slots) of the counterexample or None)."""
    table = {}
    for row in out["rows"]:
        pool = "cuda_vmm" if "(cuda_vmm pool)" in row["assumptions"] else "cuda_ipc"
        cex = row["counterexample"]
        topo = None if cex is None else tuple(cex["topology"][k] for k in ("tp_size", "attn_dp_size", "slots"))
        table[(pool, row["property"])] = (row["verdict"], topo)
    assert len(table) == len(out["rows"]) == cells, [r["assumptions"] for r in out["rows"]]
    return table


ALL_HOLD = {(p, q): ("holds", None) for p in ("cuda_ipc", "cuda_vmm") for q in ("safety", "liveness", "valid_ack")}


def test_0_5_23_holds_on_both_pools() -> None:
    out = run_version("0.5.23")
    assert verdict_table(out) == ALL_HOLD
    for t, view in out["views"].items():
        assert view["name"] == f"sglang-0.5.23 ({t} pool)"
        assert (view["K_p tp4 dp2"], view["K_p tp4"], view["K_c tp4 dp2"], view["clamp 4 of 2"]) == (2, 4, 1, 2)
        assert view["single ack rank 3, 2 words"] == [1]  # tp_rank % K_p
        assert view["non_owner_release"] is True
        assert "release_transport_proxies <- release_features" in view["provenance"]["non_owner_release"]
        assert "owner's (reconstructed) item: nothing" in view["provenance"]["non_owner_release"]
    assert (out["views"]["cuda_ipc"]["late_acks"], out["views"]["cuda_vmm"]["late_acks"]) == ("overwrite", "count")
    assert all(r["counts_from"] == "real code" and r["depth"] == 7 for r in out["rows"])


def test_0_5_18_holds_and_its_no_modulo_ack_is_never_reached() -> None:
    out = run_version("0.5.18")
    assert verdict_table(out) == ALL_HOLD
    ipc, vmm = out["views"]["cuda_ipc"], out["views"]["cuda_vmm"]
    assert (ipc["K_p tp4 dp2"], vmm["K_p tp4 dp2"], ipc["K_c tp4 dp2"], ipc["clamp 4 of 2"]) == (4, 2, 4, 2)
    assert ipc["non_owner_release"] is False and vmm["non_owner_release"] is False
    # The CUDA IPC single ack refuses a global rank past the slot (no modulo)...
    assert (
        ipc["single ack rank 3, 2 words"].startswith("refused: RuntimeError")
        and "outside [0, 2)" in (ipc["single ack rank 3, 2 words"])
    )
    # ...but the VMM proxy picks its word from the attention-TP rank, so the VMM pool never meets that path.
    assert vmm["single ack rank 3, 2 words"] == [1]


def test_0_5_21_late_releases_break_liveness_on_cuda_ipc_and_safety_on_vmm() -> None:
    out = run_version("0.5.21")
    expected = dict(ALL_HOLD)
    expected[("cuda_ipc", "liveness")] = ("fails", (2, 1, 2))
    expected[("cuda_vmm", "safety")] = ("fails", (2, 1, 2))
    assert verdict_table(out) == expected
    ipc, vmm = out["views"]["cuda_ipc"], out["views"]["cuda_vmm"]
    assert (ipc["K_p tp4 dp2"], vmm["K_p tp4 dp2"], ipc["K_c tp4 dp2"]) == (4, 2, 4)
    assert ipc["non_owner_release"] is True and vmm["non_owner_release"] is True
    for row in out["rows"]:
        if row["verdict"] == "fails":
            late = [s for s in row["counterexample"]["sequence"] if s.startswith("non-owner rank 1 releases item 0")]
            assert late, row["counterexample"]["sequence"]  # the late release of the first item is the cause
