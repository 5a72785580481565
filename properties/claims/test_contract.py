"""Property 5: the producer/consumer contract (semantics §5), claims C8 and C9.

Every key any consumer reads must be written by every producer path: the
non-EPD processor, the EPD start path, each EPD backend, under each policy.
Checked end to end (produce, ship over the CPU transport, materialize on the
owner), so a key the consumer reads and no producer wrote shows up as the
crash it causes (upstream's warm-up ``KeyError: 'backend'``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deferlab.properties import claimcheck, seam, verdicts
from deferlab.properties import strategies as s
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.contract import (
    DEFERRED_PREPROCESSING_KEY,
    GRID_THWS_KEY,
    IMAGE_GRID_THW_KEY,
)
from deferlab.reference.system.profiles import profile

K3 = profile("kimi-k3")  # small images always defer under it: raw bytes are far below the padded FP32 bytes
POLICIES = ["PR_33921", "RELEASED", "HARDENED", "INTERIM_418975B", "INTERIM_3D3194F"]
START_PATHS = ("non-epd", "epd-gpu", "epd-cpu")


def produce(impl: seam.Impl, policy: str, images: list[Any], path: str) -> list[Any]:
    """The deferred items one start path writes for ``images``."""
    if path == "non-epd":
        out = impl.process(images, K3, policy=policy)
        flags = out.deferred if isinstance(out.deferred, list) else [out.deferred] * len(images)
        assert all(flags), f"kimi-k3 must defer small images, got {flags}"
        return out.items
    if path == "epd-gpu":
        return impl.process(images, K3, policy=policy, epd=True).items
    return impl.epd_items(images, K3, policy=policy, backend="cpu")


def check_contract(impl: seam.Impl, policy: str, images: list[Any]) -> None:
    """On every start path, items carry the grid and config, and the owner materializes them in full."""
    paths = START_PATHS if impl.has_epd(policy) else START_PATHS[:1]  # at the PR the EPD encoder never deferred
    for path in paths:
        items = produce(impl, policy, images, path)
        for i, item in enumerate(items):
            msd = item.model_specific_data
            has_grid = IMAGE_GRID_THW_KEY in msd or GRID_THWS_KEY in msd  # the consumer falls back to grid_thws
            assert has_grid and DEFERRED_PREPROCESSING_KEY in msd, f"{path}: item {i} lacks a grid or config: {msd}"
        delivered = impl.deliver(items, 1, policy=policy)[0]
        try:
            feats = seam.to_numpy(impl.materialize(delivered, range(len(images)), K3, policy=policy))
        except NotImplementedError:
            continue  # this consumer cannot run here (the implementation's provenance says why); keys were checked
        except Exception as e:
            raise AssertionError(f"{path} producer -> consumer: {type(e).__name__}: {e}") from e
        want = 0
        for img in images:
            w, h = img.size if hasattr(img, "size") and not hasattr(img, "shape") else (img.shape[2], img.shape[1])
            want += resize_config(int(w), int(h), K3).num_patches
        assert feats.shape[0] == want, f"{path}: materialized {feats.shape[0]} patches, the grids say {want}"


def contract_requests(policy: str) -> st.SearchStrategy[list[Any]]:
    modes = claimcheck.request_modes(policy)
    return s.requests(min_images=1, max_images=3, max_side=6, modes=modes)


@pytest.mark.policies("PR_33921", "RELEASED", "HARDENED")
@given(data=st.data())
def test_every_start_path_writes_what_the_consumer_reads(impl, policy, data):
    """Every producer path writes every key the policy's consumer reads; the owner materializes all images."""
    check_contract(impl, policy, data.draw(contract_requests(policy)))


@pytest.mark.claim("C8")
def test_claim_c8_contract_complete(impl, policy):
    """C8: the producer/consumer contract is complete on every start path (EPD and non-EPD, each backend)."""
    import torch

    pinned = [[torch.zeros((3, 4, 4), dtype=torch.uint8)]]  # the warm-up request of a non-EPD server
    verdict = claimcheck.verify_claim(
        "C8",
        policy,
        contract_requests(policy),
        lambda imgs: check_contract(impl, policy, imgs),
        pinned=pinned,
        applicable=impl.defers(policy),
    )
    claimcheck.assert_expected("C8", policy, verdict)


@pytest.mark.claim("C9")
def test_claim_c9_ipc_counts(impl, policy):
    """C9: IPC consumer counts are right in every topology (the simulator's state machines decide, on the
    implementation's own count sources: a modelled policy's, or the real code's)."""
    from deferlab.sim.ipc.claim import verdicts as sim_verdicts

    budget = max(10, min(30, settings.default.max_examples // 6))
    rows = sim_verdicts(budget, policies=tuple(impl.ack_counts(policy)))
    assert rows, f"sim.ipc.verdicts returned no rows for {policy}"
    failing = [r for r in rows if r["verdict"] == "fails"]
    real = seam.is_real_code(impl)
    expect = None if real else claimcheck.CLAIMS["C9"].failures.get(policy)
    for r in failing:  # every failing cell must be the documented kind of flaw, else the test errors
        cell = f"{r['property']} under {r['assumptions']}"
        if expect is not None and not re.search(expect, cell):
            raise claimcheck.UnexpectedFailure(f"C9 {policy}: failing cell {cell!r} does not match /{expect}/")
    if failing:
        first = failing[0]
        evidence = f"fails for {len(failing)} of {len(rows)} (assumptions, property) cells, e.g. " + "; ".join(
            f"{r['property']} under {r['assumptions']}" for r in failing[:3]
        )
        verdicts.record_claim("C9", policy, "fails", evidence, first["counterexample"], seam.evidence())
    else:
        evidence = f"holds in all {len(rows)} (assumptions, property) cells, budget {budget} each"
        verdicts.record_claim("C9", policy, "holds", evidence, None, seam.evidence())
    claimcheck.assert_expected("C9", policy, "fails" if failing else "holds")
