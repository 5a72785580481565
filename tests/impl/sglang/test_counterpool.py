"""`impl.sglang.counterpool`: 0.5.17's PR-era counter pool, run through the simulator's IPC machine (claim C9).

The runner and its helpers are `test_ackcounts`'s (one child process per version).
"""

from __future__ import annotations

from tests.impl.sglang.test_ackcounts import run_version, verdict_table


def test_0_5_17_counter_pool_holds() -> None:
    """0.5.17's PR-era counter pool: all three properties hold (derived from the code before running it).

    Read in ``utils/cuda_ipc_transport_utils.py``, ``managers/schedule_batch.py`` and ``models/kimi_k3.py``:

    * There is no ``multimodal/transport/`` and no VMM feature pool: one row set, the CUDA IPC pool,
      whose chunk has one shared-memory float counter and no words or generations.
    * Threshold: ``MmItemMemoryChunk.try_to_recycle`` frees (and zeroes) a chunk only when the counter
      equals ``get_server_args().tp_size`` = tp, whatever the attention-DP size.
    * K_c: the Kimi-K3 loader passes ``max(server_args.tp_size, 1)`` = tp to ``reconstruct``, which
      hands it unchanged (no clamp: the proxy carries no count) through ``reconstruct_on_target_device``
      to ``_acknowledge_consumption``, which adds it under a file lock, once per proxy copy
      (``_consumer_acknowledged``).
    * Request end: ``MultimodalInputs.release_features()`` sets ``item.feature = None``; a rank that
      never read its item acknowledges nothing (non-owners do not release). The cache-hit path
      (attention-TP rank 0 adds tp for an item no one reads) is not modelled, as for 0.5.18-0.5.21.

    So every lease gets exactly one add, of tp, from its owner after its copy: the counter goes 0 -> tp,
    the recycler frees the chunk only then (**safety holds**), always reaches it (**liveness holds**),
    and no count is <= 0, the only one the code refuses (**valid_ack holds**). No add can land late, so
    the counter's lack of generations (a late add would pre-charge the next lease) never matters.
    """
    out = run_version("0.5.17")
    table = verdict_table(out, cells=3)
    assert table == {("cuda_ipc", q): ("holds", None) for q in ("safety", "liveness", "valid_ack")}
    assert all(
        r["assumptions"].startswith("counter pool (recycle on == the producer's own count, cuda_ipc pool)")
        and r["counts_from"] == "real code"
        and r["depth"] == 7
        for r in out["rows"]
    )
    (view,) = out["views"].values()
    assert (view["name"], view["pool"]) == ("sglang-0.5.17 (cuda_ipc pool)", "counter")
    # threshold = tp (not tp // dp), K_c = tp, no clamp, adds what it is given
    assert (view["K_p tp4 dp2"], view["K_p tp4"], view["K_c tp4 dp2"], view["clamp 4 of 2"]) == (4, 4, 4, 4)
    assert view["single ack rank 3, 2 words"] == 1.0
    assert view["non_owner_release"] is False and view["idempotent_acks"] is True
    assert view["late_acks"] == "count"  # run: a stale add lands on the recycled chunk's counter
    prov = view["provenance"]
    assert "try_to_recycle" in prov["producer_total"] and "tp 2: 2, tp 3: 3, tp 4: 4" in prov["producer_total"]
    assert "reconstruct -> reconstruct_on_target_device" in prov["resolve"]
    assert prov["non_owner_release"].startswith("real: release_features() on a non-owner's item acknowledged nothing")
