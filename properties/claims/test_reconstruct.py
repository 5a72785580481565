"""``MultimodalDataItem.reconstruct`` (``real_code``): every CUDA IPC proxy an item's ``model_specific_data`` holds is
materialized on the target device, except the retained feature proxy it keeps for a later acknowledgement,
wherever that key sits among the others.

Why: the claims' items carry no proxy in ``model_specific_data`` besides the
feature, so which keys the loop skips was seen by nothing (a mutation
campaign's survivor: the retained key's ``continue`` read as ``break`` left
every proxy after it unmaterialized). The proxies are SGLang's own
``CudaIpcTensorTransportProxy`` built by its ``__init__`` (`impl.sglang.counts.IPCCounts.proxy`),
a subclass answering ``reconstruct_on_target_device`` with a marker: there is no
CUDA here. The model holds no proxy objects (the simulator models their counts,
C9), so on the model this property has nothing to check and skips; a release
without the retained key (before 0.5.21) skips too.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.real_code


def _real_parts(impl):
    """(schedule_batch, the proxy class, the retained key, a proxy factory), or a skip."""
    counts = getattr(impl, "ipc_counts", None)
    source = getattr(impl, "source", None)
    if counts is None or source is None:
        pytest.skip("the model holds no CUDA IPC proxy objects (sim.ipc models their counts)")
    if not source.has("multimodal.transport.cuda_ipc"):
        pytest.skip("this release has no multimodal.transport.cuda_ipc")
    ci = source.module("multimodal.transport.cuda_ipc")
    key = getattr(ci, "RETAINED_CUDA_IPC_FEATURE_PROXY_KEY", None)
    if key is None:
        pytest.skip("this release keeps no retained feature proxy in model_specific_data")
    return source.module("managers.schedule_batch"), ci.CudaIpcTensorTransportProxy, key, counts()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    others=st.lists(st.tuples(st.sampled_from(["grid", "extra", "pos", "mask"]), st.booleans()), max_size=4),
    where=st.integers(0, 4),
)
@example(others=[("grid", False), ("extra", True)], where=0)
def test_reconstruct_materializes_every_proxy_but_the_retained_one(impl, others, where):
    """After ``reconstruct(0)``: each other proxy key holds its materialized tensor, the retained proxy stays."""
    sb, proxy_cls, retained_key, counts = _real_parts(impl)

    class Marked(proxy_cls):
        def reconstruct_on_target_device(self, *args, **kwargs):
            return ("materialized", self._deferlab_tag)

    def proxy(tag: str):
        p = counts.proxy("cuda_ipc", 1, cls=Marked)
        p._deferlab_tag = tag
        return p

    names = list(dict.fromkeys(n for n, _ in others))
    is_proxy = dict(others)
    entries = [(n, proxy(n) if is_proxy[n] else f"plain {n}") for n in names]
    kept = proxy("retained")
    entries.insert(min(where, len(entries)), (retained_key, kept))
    item = sb.MultimodalDataItem(modality=sb.Modality.IMAGE)
    item.feature = torch.zeros(1, dtype=torch.uint8)
    item.model_specific_data = dict(entries)
    item.reconstruct(0)
    got = item.model_specific_data
    assert got[retained_key] is kept, "the retained feature proxy was materialized or replaced"
    for n in names:
        want = ("materialized", n) if is_proxy[n] else f"plain {n}"
        assert got[n] == want, f"model_specific_data[{n!r}] is {got[n]!r} after reconstruct, want {want!r} (order {list(got)})"  # fmt: skip
