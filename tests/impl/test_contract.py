"""The deferred item contract (semantics §5) between impl's producers and consumer, and the cpu transport."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from deferlab.impl.consumer import consumer_reads, read_deferred
from deferlab.impl.items import KimiK3DeferredPreprocessing
from deferlab.impl.model import materialize
from deferlab.impl.processor import Processor
from deferlab.impl.transport import deliver, deserialize_items, serialize_items
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import CONTRACT_FIELDS, DEFERRED_PREPROCESSING_KEY, IMAGE_GRID_THW_KEY
from deferlab.reference.system.policies import (
    HARDENED,
    INTERIM_3D3194F,
    INTERIM_418975B,
    POLICIES,
    PR_33921,
    RELEASED,
    RELEASED_0_5_19,
    Policy,
)
from tests.impl.support import K3, small_config

DEFERRING = [p for p in POLICIES.values() if p.defer_enabled]


def _written_keys(cfg: object) -> frozenset[str]:
    if dataclasses.is_dataclass(cfg):
        return frozenset(f.name for f in dataclasses.fields(cfg))
    return frozenset(cfg)


def _deferred(policy: Policy, epd: bool, cfg: PreprocessConfig = K3) -> list:
    imgs = [torch.zeros(3, 32, 32, dtype=torch.uint8), torch.full((4, 20, 28), 7, dtype=torch.uint8)]
    out = Processor(cfg, policy=policy, cuda_available=True, device="cpu", epd=epd).process(imgs)
    assert all(DEFERRED_PREPROCESSING_KEY in it.model_specific_data for it in out.items)
    return out.items


@pytest.mark.parametrize("epd", [False, True], ids=["non-epd", "epd"])
@pytest.mark.parametrize("policy", DEFERRING, ids=lambda p: p.name)
def test_every_key_the_consumer_reads_is_written(policy: Policy, epd: bool) -> None:
    """Producers write every key the consumer reads, except the one known hole: 418975ba6's non-EPD 'backend'."""
    items = _deferred(policy, epd)
    written = _written_keys(items[0].model_specific_data[DEFERRED_PREPROCESSING_KEY])
    assert written == CONTRACT_FIELDS[policy.epd_contract if epd else policy.contract]
    missing = consumer_reads(policy) - written
    expected_hole = {"backend"} if (policy is INTERIM_418975B and not epd) else set()
    assert missing == expected_hole


@pytest.mark.parametrize("epd", [False, True], ids=["non-epd", "epd"])
@pytest.mark.parametrize("policy", DEFERRING, ids=lambda p: p.name)
def test_consumer_materializes_what_producers_wrote(policy: Policy, epd: bool) -> None:
    """Every producer path materializes on the owner, except INTERIM_418975B non-EPD: KeyError 'backend'."""
    items = deliver(_deferred(policy, epd), "cpu", 1, policy).rank_items[0]
    if policy is INTERIM_418975B and not epd:
        with pytest.raises(KeyError, match="backend"):
            materialize(items, [0, 1], config=K3, device="cpu", policy=policy)
        return
    out = materialize(items, [0, 1], config=K3, device="cpu", policy=policy)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (16 + 4, 3, 14, 14)  # 32x32 -> 4x4 patches, 28x20 -> 2x2


@pytest.mark.parametrize(
    ("policy", "form"), [(PR_33921, dict), (INTERIM_418975B, dict), (RELEASED, KimiK3DeferredPreprocessing)]
)
def test_contract_form_per_policy(policy: Policy, form: type) -> None:
    """The PR writes a dict, released a frozen dataclass with backend 'gpu' (8554d9a5b)."""
    cfg = _deferred(policy, epd=False)[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]
    assert isinstance(cfg, form)
    if form is KimiK3DeferredPreprocessing:
        assert cfg.backend == "gpu"
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.backend = "cpu"  # type: ignore[misc]


def test_epd_interim_writes_backend_and_layout() -> None:
    """418975ba6's EPD producer adds backend 'gpu' and feature_layout 'chw' to the dict."""
    cfg = _deferred(INTERIM_418975B, epd=True)[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]
    assert cfg["backend"] == "gpu" and cfg["feature_layout"] == "chw"
    assert read_deferred(cfg, INTERIM_418975B, 14).backend == "gpu"


def test_deferred_item_shape_of_sglang_producer_test() -> None:
    """semantics §5.3 / EPD test values (p=2, m=2, L=1024, S=64): 8x6 -> grid [1,4,4], 5x9 -> [1,6,4]; uint8 CPU CHW."""
    cfg = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=1024, patch_limit_on_one_side=64)
    imgs = [torch.arange(3 * 6 * 8, dtype=torch.uint8).view(3, 6, 8), torch.ones(3, 9, 5, dtype=torch.uint8)]
    out = Processor(cfg, cuda_available=True, device="cpu").process(imgs)
    assert out.deferred is True
    grids = [it.model_specific_data[IMAGE_GRID_THW_KEY] for it in out.items]
    assert [g.tolist() for g in grids] == [[[1, 4, 4]], [[1, 6, 4]]]
    assert all(g.dtype == torch.int64 for g in grids)
    for it, img in zip(out.items, imgs, strict=True):
        assert it.feature.dtype == torch.uint8 and it.feature.device.type == "cpu"
        assert torch.equal(it.feature, img)
    rc = out.items[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]["resize_config"]
    assert rc == {"num_tokens": 4, "new_width": 8, "new_height": 6, "pad_width": 0, "pad_height": 2}


@pytest.mark.parametrize("policy", [PR_33921, RELEASED], ids=lambda p: p.name)
def test_cpu_transport_round_trip(policy: Policy) -> None:
    """cpu transport: every rank gets an equal, independent copy; the measured size is the serialized length."""
    items = _deferred(policy, epd=False)
    data = serialize_items(items)
    d = deliver(items, "cpu", 3, policy)
    assert d.bytes_per_rank == len(data) and d.ipc_consumer_count is None
    for rank_items in d.rank_items:
        for a, b in zip(items, rank_items, strict=True):
            assert a is not b and torch.equal(a.feature, b.feature)
            assert a.feature.data_ptr() != b.feature.data_ptr()
            assert a.model_specific_data.keys() == b.model_specific_data.keys()
    assert (
        deserialize_items(data)[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]
        == items[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]
    )


def test_deferred_payload_is_smaller_than_eager() -> None:
    """Shipping uint8 pixels moves fewer bytes than FP32 patches for a request the gate defers."""
    cfg = small_config()
    imgs = [torch.randint(0, 256, (3, 20, 20), dtype=torch.uint8) for _ in range(3)]
    d = Processor(cfg, cuda_available=True, device="cpu").process(imgs)
    e = Processor(cfg, cuda_available=False, device="cpu").process(imgs)
    assert d.deferred is True and e.deferred is False
    assert deliver(d.items, "cpu", 1).bytes_per_rank < deliver(e.items, "cpu", 1).bytes_per_rank


@pytest.mark.parametrize("transport", ["cuda_ipc", "fabric"])
def test_ipc_transports_are_eager_only(transport: str) -> None:
    """IPC transports never carry deferred items; eager ones get the policy's acknowledgement count."""
    items = _deferred(PR_33921, epd=False)
    with pytest.raises(ValueError, match="only over the 'cpu' transport"):
        deliver(items, transport, 2)
    eager = Processor(K3, transport=transport, cuda_available=True, device="cpu").process([torch.zeros(3, 8, 8)])
    assert eager.deferred is False
    assert deliver(eager.items, transport, 4, PR_33921).ipc_consumer_count == 4  # max(tp_size, 1)
    assert deliver(eager.items, transport, 4, RELEASED_0_5_19).ipc_consumer_count == 4  # the whole group
    assert deliver(eager.items, transport, 4, HARDENED).ipc_consumer_count == 1  # 0.5.22+: the owner's own word


def test_interim_3d3194f_contract_is_dataclass() -> None:
    """From 8554d9a5b on both producers write the dataclass, so the backend hole is closed."""
    for epd in (False, True):
        cfg = _deferred(INTERIM_3D3194F, epd)[0].model_specific_data[DEFERRED_PREPROCESSING_KEY]
        assert isinstance(cfg, KimiK3DeferredPreprocessing)
