"""The C9 reproducer template: SGLang's CUDA IPC feature pool replaying the recorded acknowledgement sequence.

Why a replay and not a count: C9's evidence is the simulator's (`sim.ipc`), fed
with counts deferlab read off SGLang's code; an upstream maintainer needs the
flaw shown by SGLang's own objects. So the reproducer builds SGLang's
``StreamOrderedMmFeaturePool`` on the CPU (a CPU byte tensor stands in for its
cuda:0 allocation; its recycler thread is not started, the test runs its
recycle step where the sequence does), publishes each item with the pool's
``copy_tensor``, gives every TP rank its own copy of the item's
``CudaIpcTensorTransportProxy``, lets the owner read through the real loader of
``KimiK3ForConditionalGeneration.get_image_feature`` (so the count it
acknowledges is the one that release's loader passes to ``reconstruct``), lets
the other ranks release at request end through ``MultimodalInputs.release_features``,
and asks the pool's own recycler whether every slot frees. Only the two CUDA
steps of the proxy (mapping the pool slice and copying it out) are skipped;
which ack words it writes, once per copy, is ``_acknowledge_on_stream``'s.

Fits only the CUDA IPC pool's counterexample with attention DP off (the
released failures: TP 2, two slots); any other is left to the report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

C9 = '''
import contextlib
import types

import torch

import sglang.srt.models.kimi_k3 as kimi_k3_model
import sglang.srt.multimodal.mm_utils as mm_utils
import sglang.srt.multimodal.transport.memory_pool as memory_pool
from sglang.srt.managers.schedule_batch import Modality, MultimodalDataItem, MultimodalInputs
from sglang.srt.multimodal.transport.cuda_ipc import CudaIpcTensorTransportProxy
from sglang.srt.multimodal.transport.memory_pool import StreamOrderedMmFeaturePool

TP_SIZE = $tp_size  # scheduler TP ranks, attention DP off: every rank receives every request
CONSUMERS = $consumers  # the pool's consumer count, as SGLang's base processor computes it for this topology
SLOTS = $slots  # the pool's max_inflight_slices
# The recorded sequence: ("publish", item, owner rank), ("read", item, owner rank), ("release", item, rank that
# never read it, at request end), ("recycle",) and ("drain",): the pool's recycler runs (it also runs before a
# publish, as the recycler thread would have by then).
STEPS = [
$steps
]


class _OnDevice:
    """A CPU tensor as the pool checks its cuda:0 allocation and the features it copies in (is_cuda, device)."""

    is_cuda, device = True, torch.device("cuda", 0)

    def __init__(self, tensor):
        self.tensor = tensor

    def __getitem__(self, key):
        return self.tensor[key]

    def __getattr__(self, name):
        return getattr(self.tensor, name)


class _HostTorch:
    """torch as the pool module sees it here: the tensors its recycler makes for cuda:0 are made on the CPU, and
    its device guard and synchronize do nothing; everything else is torch."""

    cuda = types.SimpleNamespace(device=lambda device: contextlib.nullcontext(), synchronize=lambda device=None: None)

    @staticmethod
    def tensor(data, *, device=None, **kwargs):
        return torch.tensor(data, **kwargs)

    def __getattr__(self, name):
        return getattr(torch, name)


class _Proxy(CudaIpcTensorTransportProxy):
    """SGLang's CUDA IPC proxy without its two CUDA steps (mapping the pool slice, copying it out); the
    acknowledgement itself (_acknowledge_on_stream: which words, once per copy) is SGLang's own."""

    def reconstruct_on_target_device(self, rebuild_device_idx, consumer_count=1, consumer_rank=None):
        self._acknowledge_on_stream(0, rebuild_device_idx, consumer_count, consumer_rank)
        return torch.zeros(4, dtype=torch.uint8)

    def acknowledge_consumption(self, consumer_count=1, consumer_rank=None):
        self._acknowledge_on_stream(0, 0, consumer_count, consumer_rank)


class _Read(Exception):
    """The owner's item is reconstructed; what its loader does next (the vision tower) needs a GPU."""


def _parallel(rank):
    """What get_parallel() answers on TP rank ``rank`` (attention DP off), as SGLang's tests patch it."""
    return types.SimpleNamespace(
        tp_size=TP_SIZE, tp_rank=rank, attn_tp_size=TP_SIZE, attn_tp_rank=rank, attn_dp_enabled=False,
        num_dp_ranks=1, dp_size=1,
    )


def _on_rank(monkeypatch, rank):
    for module in (kimi_k3_model, memory_pool):
        monkeypatch.setattr(module, "get_parallel", lambda: _parallel(rank), raising=False)
    monkeypatch.setattr(kimi_k3_model, "configured_tp_size", lambda: TP_SIZE, raising=False)


def _pool(monkeypatch):
    """SGLang's own pool over a CPU byte tensor; its stream writes land in that tensor."""
    monkeypatch.setattr(memory_pool, "torch", _HostTorch())
    monkeypatch.setattr(StreamOrderedMmFeaturePool, "_recycle_loop", lambda self: None)  # the test recycles
    control = SLOTS * (1 + CONSUMERS) * memory_pool.CONTROL_WORD_BYTES
    memory = torch.zeros((control // 256 + 1 + SLOTS) * 256, dtype=torch.uint8)
    words = memory.view(torch.int32)

    def write(device, address, value, name):  # cuStreamWriteValue32, on the CPU
        words[address // memory_pool.CONTROL_WORD_BYTES] = value

    monkeypatch.setattr(memory_pool, "stream_write_value32", write)
    return StreamOrderedMmFeaturePool(
        memory_size=memory.numel(), byte_tensor=_OnDevice(memory), base_address=0, device_id=0,
        consumer_count=CONSUMERS, recycle_interval=1.0, transport_name="CUDA IPC", max_inflight_slices=SLOTS,
    )


def _model():
    """A KimiK3ForConditionalGeneration without weights on cuda:0, as SGLang's consumer tests build one."""
    model = object.__new__(kimi_k3_model.KimiK3ForConditionalGeneration)
    torch.nn.Module.__init__(model)
    proj = types.SimpleNamespace(weight=torch.empty(0, dtype=torch.bfloat16))
    model.vision_tower = types.SimpleNamespace(
        device=torch.device("cuda", 0), patch_size=14, patch_embed=types.SimpleNamespace(proj=proj)
    )
    model.use_data_parallel, model.mm_projector, model._encoder_image_processor = True, (lambda x: x), None
    return model


def test_${cid}_every_slot_frees_once_every_rank_is_done(monkeypatch):
    """Every consumer acknowledges each item once (the owner when it reads, every other rank at request end):
    no slot frees before its owner has read it, and every slot frees once all ranks are done."""
    pool, model, items, leases, done = _pool(monkeypatch), _model(), {}, {}, set()
    real_reconstruct = MultimodalDataItem.reconstruct

    def reconstruct(item, *args, **kwargs):
        real_reconstruct(item, *args, **kwargs)  # SGLang's: the clamp, then the proxy's acknowledgement
        raise _Read

    monkeypatch.setattr(MultimodalDataItem, "reconstruct", reconstruct)

    def recycle():
        with pool._lock:
            pool._recycle_ready_leases_locked()
        early = [i for i, lease in leases.items() if i not in done and pool._occupied.get(lease.slot) != lease]
        assert not early, f"item(s) {early} freed before their owner read them: words {pool._control_words.tolist()}"

    for step, *args in STEPS:
        if step == "publish":
            recycle()
            lease, data = pool.copy_tensor(_OnDevice(torch.zeros(4, dtype=torch.uint8)))
            assert lease is not None, f"no free slot for item {args[0]}: words {pool._control_words.tolist()}"
            leases[args[0]] = lease
            for rank in range(TP_SIZE):  # each rank unpickles its own copy of the proxy MmItemMemoryPool wraps
                proxy = _Proxy(
                    data=data, info_data=torch.zeros(4, dtype=torch.uint8), pool_ipc_handle=None,
                    pool_byte_offset=lease.start, ready_byte_offset=lease.ready_byte_offset,
                    ack_byte_offset=lease.ack_byte_offset, generation=lease.generation,
                    total_consumer_count=CONSUMERS, use_pool_handle_cache=True,
                )
                grid = {"image_grid_thw": torch.tensor([[1, 1, 1]])}
                items[args[0], rank] = MultimodalDataItem(
                    modality=Modality.IMAGE, feature=proxy, model_specific_data=grid
                )
        elif step == "read":
            _on_rank(monkeypatch, args[1])
            seen = {}
            monkeypatch.setattr(mm_utils, "run_dp_sharded_mrope_vision_model", lambda *a, **kw: seen.update(kw))
            model.get_image_feature([items[args[0], args[1]]])
            with contextlib.suppress(_Read):
                seen["load_local_pixel_values"]([0])
            done.add(args[0])
        elif step == "release":
            _on_rank(monkeypatch, args[1])
            MultimodalInputs(mm_items=[items[args[0], args[1]]]).release_features()
        else:
            recycle()
    recycle()
    stuck = sorted(pool._occupied)
    assert not stuck, (
        f"slot(s) {stuck} never free after every consumer finished (each slot's words, ready first: "
        f"{pool._control_words.tolist()})"
    )
'''

_STEP = (
    (re.compile(r"publish item (\d+) to group 0 \(owner rank (\d+)\) -> slot \d+"), "publish"),
    (re.compile(r"owner rank (\d+) reads item (\d+), acks \d+"), "read"),
    (re.compile(r"non-owner rank (\d+) releases item (\d+) \(ack 1\)"), "release"),
    (re.compile(r"recycler runs"), "recycle"),
    (re.compile(r"drain: .*"), "drain"),
)


def _steps(sequence: list[Any]) -> list[tuple[tuple[Any, ...], str]] | None:
    """(step tuple, the recorded line) per line after the topology; None when a line is not one the template
    replays (a refused acknowledgement, a publish that found no slot)."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for line in sequence[1:]:
        for pattern, kind in _STEP:
            m = pattern.fullmatch(str(line))
            if m is None:
                continue
            nums = [int(g) for g in m.groups()]
            if kind == "publish":
                out.append((("publish", nums[0], nums[1]), line))
            elif kind in ("read", "release"):
                out.append(((kind, nums[1], nums[0]), line))
            else:
                out.append(((kind,), line))
            break
        else:
            return None
    return out


def fit_c9(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The recorded state-machine run, if it is the CUDA IPC pool's with attention DP off (the first failing
    cell the evidence names is the counterexample's)."""
    if not isinstance(ce, Mapping) or not isinstance(ce.get("topology"), Mapping):
        return None
    first = re.search(r"e\.g\. (.*?)(?:; |$)", failure)
    if first is None or "(cuda_ipc pool)" not in first.group(1):
        return None
    topo, sequence = ce["topology"], ce.get("sequence")
    try:
        tp, dp, slots, k_p = (int(topo[k]) for k in ("tp_size", "attn_dp_size", "slots", "K_p"))
    except (KeyError, TypeError, ValueError):
        return None
    steps = _steps(sequence) if isinstance(sequence, list) and sequence else None
    if dp != 1 or not steps or not any(s[0] == "publish" for s, _ in steps):
        return None
    lines = [f"    {step!r},  # {line}" for step, line in steps]
    return {"tp_size": tp, "consumers": k_p, "slots": slots, "steps": "\n".join(lines)}
