"""SGLang 0.5.17's PR-era CUDA IPC feature pool, run on a CPU: the numbers behind its shared-memory counter (C9).

Why a module of its own: 0.5.17 has no stream-ordered pool (no
``multimodal/transport/``, no ack words). Its pool lives in
``utils/cuda_ipc_transport_utils.py``. Each chunk has one float32 counter in a
POSIX shared-memory segment (``ShmSyncBuffer``). A consumer's proxy adds its
count to that counter under a file lock (``_acknowledge_consumption``). The
recycler (``MmItemMemoryChunk.try_to_recycle``) frees a chunk when the counter
equals a threshold it reads itself. None of that needs CUDA, so the segment,
the lock, the add and the comparison all run here for real, on real segments
that are unlinked afterwards. Two steps touch GPU memory, and only those are
answered (recorded on the source): the consumer's mapping of the pool slice
(``_reconstruct_from_ipc_extra`` gives a zeroed CPU slice instead) and the
copy target's allocation (``_copy_slice_tensor_to_target`` runs its own code
with torch allocating on the CPU). The pool object itself (``torch.empty`` on
CUDA) is never built: a chunk is built on its own around a segment.

Each answer says which SGLang function produced it in ``sources`` (the dict
`impl.sglang.counts.IPCCounts` shares), as the stream-ordered methods do.
"""

from __future__ import annotations

import contextlib
import pickle
import types
from collections.abc import Callable
from functools import cached_property
from typing import Any

import torch

from deferlab.impl.sglang import runtime, topology
from deferlab.impl.sglang.sources import Source

STREAM_ORDERED = "sglang/srt/multimodal/transport/memory_pool.py"  # 0.5.18+: generation words
COUNTER_MODULE = "utils.cuda_ipc_transport_utils"
POOL_HANDLE = ("stand-in pool handle",)  # never opened: the mapping of the slice is answered on the CPU


def pool_kind(source: Source) -> tuple[str, str]:
    """("generation" | "counter", why): which feature pool the loaded tree has, from its files and classes."""
    if (source.root / STREAM_ORDERED).is_file():
        return "generation", f"{STREAM_ORDERED} exists: the stream-ordered generation pool"
    cu = source.module(COUNTER_MODULE)
    chunk = getattr(cu, "MmItemMemoryChunk", None)
    if chunk is not None and hasattr(chunk, "try_to_recycle") and hasattr(cu, "ShmSyncBuffer"):
        return "counter", (
            f"no {STREAM_ORDERED}; {cu.__name__} has ShmSyncBuffer and MmItemMemoryChunk.try_to_recycle: "
            "the PR-era shared-memory counter pool (no VMM feature pool)"
        )
    raise RuntimeError(f"{source.name}: neither {STREAM_ORDERED} nor a counter pool in {cu.__name__}")


class _HostTorch(types.ModuleType):
    """``torch`` as ``_copy_slice_tensor_to_target`` sees it here: a CUDA allocation lands on the CPU, and
    ``torch.cuda.device`` is a no-op guard; everything else is the real torch."""

    def __init__(self) -> None:
        super().__init__("torch")
        self.cuda = types.SimpleNamespace(device=lambda device: contextlib.nullcontext())

    def empty(self, *args: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
        return torch.empty(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class CounterCounts:
    """The counter pool's threshold, adds, idempotence, late adds and request-end releases, each run."""

    def __init__(self, source: Source, sources: dict[str, str]) -> None:
        self.source = source
        self.sources = sources
        self._thresholds: dict[int, int] = {}  # tp_size -> the counter value that frees a chunk (run)

    @cached_property
    def module(self) -> types.ModuleType:
        return self.source.module(COUNTER_MODULE)

    # -- building blocks ----------------------------------------------------------------------------------------
    def _segment(self) -> Any:
        """A real ``ShmSyncBuffer`` (counter 0). Its own ``__del__`` unlinks it once the caller drops it."""
        return self.module.ShmSyncBuffer()

    @staticmethod
    def _value(segment: Any) -> float:
        return float(segment.buffer_wrapper.item())

    def _proxy(self, segment: Any, cls: type | None = None) -> Any:
        """A proxy for a chunk counted by ``segment``, built by its own ``__init__`` (a one-byte CPU slice).

        A plain proxy is pickled and unpickled: what a scheduler rank holds is its own copy, with its
        own ``_consumer_acknowledged`` flag.
        """
        one = torch.zeros(1, dtype=torch.uint8)
        proxy = (cls or self.module.CudaIpcTensorTransportProxy)(
            data=one, info_data=one, sync_buffer_meta=segment.meta_data, pool_ipc_handle=POOL_HANDLE
        )
        return proxy if cls is not None else pickle.loads(pickle.dumps(proxy))  # noqa: S301 - our own object

    def _recording(self, calls: list[tuple[float, str]], extra: dict[str, Any] | None = None) -> type:
        """A proxy subclass whose ``_acknowledge_consumption`` records (count, SGLang frames), then runs for real."""
        base = self.module.CudaIpcTensorTransportProxy

        def _acknowledge_consumption(self_proxy: Any, consumer_count: int = 1) -> None:
            calls.append((consumer_count, runtime.sglang_callers(self.source)))
            base._acknowledge_consumption(self_proxy, consumer_count)

        attrs: dict[str, Callable[..., Any]] = {"_acknowledge_consumption": _acknowledge_consumption, **(extra or {})}
        return type(f"Recording{base.__name__}", (base,), attrs)

    # The names a recycler may read its threshold from: the published ServerArgs (0.5.17, the PR), then the
    # configured TP size (63833f803 on: "business code no longer reads the published ServerArgs").
    _THRESHOLD_SOURCES = ("get_server_args", "configured_tp_size", "get_parallel")

    def threshold_reads(self) -> list[str]:
        """The module-level names ``try_to_recycle`` calls for its threshold (read off its code object)."""
        code = self.module.MmItemMemoryChunk.try_to_recycle.__code__
        names = [n for n in self._THRESHOLD_SOURCES if n in code.co_names and n in self.module.__dict__]
        if not names:
            raise RuntimeError(
                f"{self.module.__name__}.MmItemMemoryChunk.try_to_recycle reads none of {self._THRESHOLD_SOURCES}"
            )
        return names

    def _server(self, tp_size: int, dp_size: int, enable_dp_attention: bool) -> contextlib.AbstractContextManager[None]:
        """Answer whatever the recycler reads its threshold from, for this topology (nothing was published here)."""
        par = topology.parallel(tp_size, dp_size=dp_size, enable_dp_attention=enable_dp_attention)
        why = "no server published its arguments here; answered for the recycler's threshold from the topology"
        return runtime.answer_topology(self.source, self.module, self.threshold_reads(), par, why)

    # -- the recycler ------------------------------------------------------------------------------------------
    def recycle_threshold(self, tp_size: int, dp_size: int = 1, enable_dp_attention: bool = False) -> int:
        """The counter value at which ``try_to_recycle`` frees a chunk, found by running it on 0..2*tp+1.

        Exactly one value must free the chunk and leave its counter zeroed (the equality rule); anything
        else is not what the simulator's `CounterPool` models, so it raises.
        """
        cu = self.module
        segment = self._segment()
        chunk = cu.MmItemMemoryChunk((0, 1), segment)
        frees = []
        with self._server(tp_size, dp_size, enable_dp_attention):
            for value in range(2 * tp_size + 2):
                segment.buffer_wrapper[:] = value  # the counter as the consumers' adds would leave it
                if chunk.try_to_recycle():
                    frees.append((value, self._value(segment)))
        if len(frees) != 1 or frees[0][1] != 0.0:
            raise RuntimeError(f"try_to_recycle at tp {tp_size}: (counter, after) when it frees = {frees}")
        self._thresholds[tp_size] = frees[0][0]
        seen = ", ".join(f"tp {tp}: {value}" for tp, value in sorted(self._thresholds.items()))
        self.sources["producer_total[counter]"] = (
            f"{cu.__name__}.MmItemMemoryChunk.try_to_recycle (run on a real ShmSyncBuffer with every counter value "
            f"0..2*tp+1; {', '.join(self.threshold_reads())} answered): frees, then zeroes, at exactly one value "
            f"({seen})"
        )
        return frees[0][0]

    # -- the consumers -----------------------------------------------------------------------------------------
    def added(self, count: int) -> float:
        """What one rank's first acknowledgement of ``count`` adds to its chunk's counter (SGLang's ValueError kept)."""
        segment = self._segment()
        self._proxy(segment)._acknowledge_consumption(count)
        self.sources["ack[counter]"] = (
            f"{self.module.__name__}.CudaIpcTensorTransportProxy._acknowledge_consumption (run: file lock and add "
            "on a real shared-memory counter, read back)"
        )
        return self._value(segment)

    def idempotence(self) -> dict[str, float]:
        """Counter after one rank's copy acknowledges 1 twice, and what a second rank's copy adds after that."""
        segment = self._segment()
        first, second = self._proxy(segment), self._proxy(segment)
        first._acknowledge_consumption(1)
        first._acknowledge_consumption(1)
        twice = self._value(segment)
        second._acknowledge_consumption(1)
        self.sources["idempotent[counter]"] = (
            f"{self.module.__name__}.CudaIpcTensorTransportProxy._acknowledge_consumption run twice on one unpickled "
            "copy, then once on another copy of the same proxy"
        )
        return {"one copy, twice": twice, "another copy adds": self._value(segment) - twice}

    def owner_ack(self, requested: int) -> tuple[int, float]:
        """(count reaching ``_acknowledge_consumption``, amount added) when the owner's item is reconstructed.

        ``MultimodalDataItem.reconstruct(0, ipc_consumer_count=requested)`` runs as shipped, through the
        proxy's ``reconstruct_on_target_device`` and ``_copy_slice_tensor_to_target`` (its own code, with
        torch allocating on the CPU), to the real add; only the mapping of the pool slice is answered.
        """
        sb = self.source.module("managers.schedule_batch")
        base = self.module.CudaIpcTensorTransportProxy

        def _reconstruct_from_ipc_extra(
            self_proxy: Any, ipc_extra: dict, *, use_cache: bool, rebuild_device_idx: int
        ) -> tuple[torch.Tensor, torch.device, None, None]:
            device = torch.device(f"cuda:{rebuild_device_idx}")
            return torch.zeros(ipc_extra["nbytes"], dtype=torch.int8), device, None, None

        host = {
            "_reconstruct_from_ipc_extra": _reconstruct_from_ipc_extra,
            "_copy_slice_tensor_to_target": runtime.run_with_globals(
                base._copy_slice_tensor_to_target, torch=_HostTorch()
            ),
        }
        for name, why in (
            ("_reconstruct_from_ipc_extra", "opens the pool's CUDA IPC handle; answered with a zeroed CPU slice"),
            ("_copy_slice_tensor_to_target", "own code, with torch allocating on the CPU (torch.cuda.device no-op)"),
        ):
            self.source.patch(f"{base.__module__}.{base.__name__}.{name}", why)
        calls: list[tuple[float, str]] = []
        segment = self._segment()
        item = runtime.tiny_item(sb)
        item.feature = self._proxy(segment, self._recording(calls, host))
        item.reconstruct(0, ipc_consumer_count=requested)
        if len(calls) != 1:
            raise RuntimeError(f"reconstruct acknowledged {len(calls)} times: {calls}")
        self.sources["resolve[counter]"] = (
            f"{sb.__name__}.MultimodalDataItem.reconstruct -> reconstruct_on_target_device -> "
            f"_copy_slice_tensor_to_target -> _acknowledge_consumption (run; frames: {calls[0][1]})"
        )
        return int(calls[0][0]), self._value(segment)

    def late_add(self, tp_size: int = 2) -> float:
        """The counter of a chunk after its lease was recycled and a stale copy of that lease's proxy acks 1.

        Lease 1's owner adds ``tp_size``, the recycler frees and zeroes the chunk, then another rank's
        copy of lease 1's proxy acknowledges: 1.0 means the add lands on the chunk whoever holds it now.
        """
        segment = self._segment()
        chunk = self.module.MmItemMemoryChunk((0, 1), segment)
        owner, late = self._proxy(segment), self._proxy(segment)
        owner._acknowledge_consumption(tp_size)
        with self._server(tp_size, 1, False):
            freed = chunk.try_to_recycle()
        if not freed:
            raise RuntimeError(f"the chunk did not free at counter {tp_size} = tp_size")
        late._acknowledge_consumption(1)
        self.sources["late[counter]"] = (
            f"{self.module.__name__}: _acknowledge_consumption, MmItemMemoryChunk.try_to_recycle, then a stale copy's "
            "_acknowledge_consumption (run on one real segment)"
        )
        return self._value(segment)

    def request_end_releases(self, owner: bool = False) -> tuple[list[tuple[float, str]], float]:
        """(acknowledgements, counter) after ``MultimodalInputs.release_features()`` on one item.

        The item's feature is a rank's copy of the proxy (a recording subclass, whose acks still run
        for real), or with ``owner=True`` the tensor an owner holds after ``reconstruct``.
        """
        sb = self.source.module("managers.schedule_batch")
        calls: list[tuple[float, str]] = []
        segment = self._segment()
        item = runtime.tiny_item(sb)
        if not owner:
            item.feature = self._proxy(segment, self._recording(calls))
        sb.MultimodalInputs(mm_items=[item]).release_features()
        self.sources["request_end_releases[counter]"] = (
            f"{sb.__name__}.MultimodalInputs.release_features (run) on a recording proxy whose acks run for real"
        )
        return calls, self._value(segment)
