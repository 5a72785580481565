"""IPC acknowledgement counts from SGLang's own code, to feed the simulator's IPC state machine (semantics §8).

Three numbers decide whether a GPU feature-pool slot is ever freed: the
producer's total consumer count K_p, the count a consumer requests K_c, and
what the pool does with K_c (clamp, then "one consumer or the whole group").
Each method below runs the code the loaded version has for it; `sources`
says which function (or expression) each number came from, per call.
Parallel state is provided the way SGLang's unit tests provide it: the
module's ``get_parallel`` (and ``configured_tp_size``) answer from a namespace.

The word-level methods (``clamp``, ``ack_words``, ``request_end_releases``)
run each transport's own proxy class: SGLang's CUDA IPC proxy writes its ack
words through the stream-ordered mixin (``resolve_consumer_rank`` for one
word), while its VMM proxy writes them through its own
``_acknowledgement_range``, so the two pools can pick different words for
the same rank. The simulator reads them through `impl.sglang.ackcounts`.
"""

from __future__ import annotations

import ast
import inspect
import types
from contextlib import ExitStack
from functools import cached_property
from typing import Any

from deferlab.impl.sglang import runtime, topology
from deferlab.impl.sglang.sources import Source


class _Stop(Exception):
    """Raised by a recorder once the value we came for has been seen."""


class IPCCounts:
    """``producer_total``, ``consumer_requested`` and ``resolve`` as the loaded SGLang computes them.

    Pool methods describe the stream-ordered pools (0.5.18+); 0.5.17's counter pool runs through `counter`.
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self.sources: dict[str, str] = {}

    # -- which pool ----------------------------------------------------------------------------------------------
    @cached_property
    def pool_kind(self) -> str:
        """Which pool: "generation" (stream-ordered ack words, 0.5.18+) or "counter" (0.5.17's shm counter)."""
        from deferlab.impl.sglang.counterpool import pool_kind

        kind, why = pool_kind(self.source)
        self.sources["pool_kind"] = why
        return kind

    @property
    def transports(self) -> tuple[str, ...]:
        """The feature pools the loaded code has: CUDA IPC and VMM, or (counter pool) CUDA IPC only."""
        return ("cuda_ipc", "cuda_vmm") if self.pool_kind == "generation" else ("cuda_ipc",)

    @cached_property
    def counter(self) -> Any:
        """The counter pool's runs (`impl.sglang.counterpool.CounterCounts`), sharing `sources`."""
        from deferlab.impl.sglang.counterpool import CounterCounts

        if self.pool_kind != "counter":
            raise RuntimeError(f"{self.source.name} has the stream-ordered pool, not the counter pool")
        return CounterCounts(self.source, self.sources)

    def _with_parallel(self, stack: ExitStack, module: types.ModuleType, ns: topology.Topology) -> None:
        """``module``'s ``get_parallel`` / ``configured_tp_size`` (those it has) answer for ``ns`` in ``stack``."""
        names = [n for n in ("get_parallel", "configured_tp_size") if n in module.__dict__]
        why = "parallel state for the count (SGLang's tests patch get_parallel the same way)"
        stack.enter_context(runtime.answer_topology(self.source, module, names, ns, why))

    # -- K_p ---------------------------------------------------------------------------------------------------
    def producer_total(
        self, tp_size: int, dp_size: int = 1, enable_dp_attention: bool = False, transport: str = "cuda_ipc"
    ) -> int:
        """Consumers a pool slot waits for (the CUDA IPC pool, or the VMM pool with ``transport="cuda_vmm"``)."""
        ns = topology.parallel(tp_size, dp_size=dp_size, enable_dp_attention=enable_dp_attention)
        if transport == "cuda_vmm":
            vmm = self.source.module("utils.cuda_vmm_transport_utils")
            fn = vmm.get_vmm_feature_consumer_count
            server = topology.server_args(tp_size, dp_size, enable_dp_attention)
            args = [server] if inspect.signature(fn).parameters else []
            mp = self.source.module("multimodal.transport.memory_pool")
            with ExitStack() as stack:
                self._with_parallel(stack, vmm, ns)
                self._with_parallel(stack, mp, ns)
                value = int(fn(*args))
            self.sources["producer_total[cuda_vmm]"] = f"{vmm.__name__}.get_vmm_feature_consumer_count (run)"
            return value
        if transport != "cuda_ipc":
            raise ValueError(f"transport must be 'cuda_ipc' or 'cuda_vmm', got {transport!r}")
        bp = self.source.module("multimodal.processors.base_processor")
        expr, line = _pool_count_expression(bp)
        server_args = topology.server_args(tp_size, dp_size, enable_dp_attention)
        env = dict(bp.__dict__)
        env["self"] = topology.Answers("the base processor", {"server_args": server_args})
        with ExitStack() as stack:
            mp = self.source.module("multimodal.transport.memory_pool")
            self._with_parallel(stack, mp, ns)
            value = int(eval(compile(ast.Expression(expr), bp.__file__, "eval"), env))  # noqa: S307
        self.sources["producer_total[cuda_ipc]"] = (
            f"{bp.__name__}:{line} the consumer-count argument of MmItemMemoryPool(...) in "
            f"BaseMultimodalProcessor.__init__, evaluated as shipped: `{ast.unparse(expr)}`"
        )
        return value

    # -- K_c ---------------------------------------------------------------------------------------------------
    def consumer_requested(
        self, tp_size: int, attn_tp_size: int | None = None, dp_size: int = 1, enable_dp_attention: bool = False
    ) -> int:
        """The ``ipc_consumer_count`` the vision-DP owner's loader passes to ``item.reconstruct`` (1 if none)."""
        sb = self.source.module("managers.schedule_batch")
        mk3 = self.source.module("models.kimi_k3")
        item_cls = sb.MultimodalDataItem
        default = inspect.signature(item_cls.reconstruct).parameters["ipc_consumer_count"].default
        seen: dict[str, Any] = {}

        def recorder(self_item: Any, target_device: Any, ipc_consumer_count: int = default, **_: Any) -> None:
            seen["count"] = ipc_consumer_count
            raise _Stop

        item = runtime.tiny_item(sb)
        ns = topology.parallel(tp_size, attn_tp_size, dp_size, enable_dp_attention)
        loader = runtime.capture_loader(self.source, [item], "cuda:0", 14, parallel=ns)
        why = "recorder: keeps the count the loader asks for, before any CUDA work"
        with runtime.patched(self.source, item_cls, "reconstruct", recorder, why):
            try:
                loader([0])
            except _Stop:
                pass
        if "count" not in seen:
            raise RuntimeError("the loader never called item.reconstruct on a CUDA device")
        self.sources["consumer_requested"] = (
            f"{mk3.__name__}.KimiK3ForConditionalGeneration.get_image_feature's loader (run on a cuda:0 device "
            f"descriptor; MultimodalDataItem.reconstruct replaced by a recorder); default when not passed: {default}"
        )
        return int(seen["count"])

    # -- what the pool does with it ----------------------------------------------------------------------------
    def resolve(self, requested: int, total: int, tp_rank: int = 0) -> int:
        """The count the pool acknowledges: SGLang's clamp, then its ack check (ValueError as SGLang raises)."""
        return self._acknowledge(requested, total, tp_rank)[0]

    def acknowledged_ranks(self, requested: int, total: int, tp_rank: int = 0) -> list[int]:
        """Which ack words the real ``_acknowledge_on_stream`` writes for this request (stream writes recorded)."""
        return self._acknowledge(requested, total, tp_rank)[1]

    def _acknowledge(self, requested: int, total: int, tp_rank: int) -> tuple[int, list[int]]:
        """(count, words): `clamp`, then `ack_words` from ``tp_rank`` of a ``total``-rank TP group, on a real CUDA
        IPC proxy. Both modules are looked up first, so a tree without the stream-ordered pool fails there."""
        sb = self.source.module("managers.schedule_batch")
        mp = self.source.module("multimodal.transport.memory_pool")
        count = self.clamp(requested, total)
        words, _ = self.ack_words(count, total, tp_rank, tp_size=total)
        self.sources["resolve"] = (
            f"{sb.__name__}.MultimodalDataItem._resolve_transport_consumer_count, then "
            f"{mp.__name__}.StreamOrderedPoolConsumerMixin._acknowledge_on_stream (both run)"
        )
        return count, words

    # -- words, per transport (see the module docstring) ------------------------------------------------------
    def proxy(self, transport: str, total: int, generation: int = 1, cls: type | None = None) -> Any:
        """A real proxy object of ``transport``'s class (or subclass ``cls``), built by its own ``__init__``.

        Both constructors only store their arguments (no CUDA call), so the object is what a scheduler
        rank unpickles, minus a mapped pool: a one-byte CPU tensor stands for the data.
        """
        import torch

        if transport == "cuda_vmm":
            vmm = self.source.module("utils.cuda_vmm_transport_utils")
            cls = cls or vmm.CudaVmmTensorTransportProxy
            control = total * self._word_bytes(transport)
            return cls(
                fabric_handle=None,
                posix_socket_path=None,
                allocation_size=control + 1,
                data_offset=control,
                data_nbytes=1,
                control_offset=0,
                consumer_count=total,
                shape=(1,),
                dtype=torch.uint8,
            )
        if transport != "cuda_ipc":
            raise ValueError(f"transport must be 'cuda_ipc' or 'cuda_vmm', got {transport!r}")
        ci = self.source.module("multimodal.transport.cuda_ipc")
        cls = cls or ci.CudaIpcTensorTransportProxy
        one = torch.zeros(1, dtype=torch.uint8)
        return cls(
            data=one,
            info_data=one,
            pool_ipc_handle=None,
            pool_byte_offset=0,
            ready_byte_offset=0,
            ack_byte_offset=self._word_bytes(transport),
            generation=generation,
            total_consumer_count=total,
            use_pool_handle_cache=False,
        )

    def _word_bytes(self, transport: str) -> int:
        """The ack word size each pool module declares (4 bytes in every release)."""
        if transport == "cuda_vmm":
            return int(self.source.module("utils.cuda_vmm_transport_utils")._CONTROL_WORD_BYTES)
        return int(self.source.module("multimodal.transport.memory_pool").CONTROL_WORD_BYTES)

    def clamp(self, requested: int, total: int, transport: str = "cuda_ipc") -> int:
        """``MultimodalDataItem._resolve_transport_consumer_count`` on a real proxy of ``transport`` (run)."""
        sb = self.source.module("managers.schedule_batch")
        value = int(sb.MultimodalDataItem._resolve_transport_consumer_count(self.proxy(transport, total), requested))
        self.sources[f"clamp[{transport}]"] = (
            f"{sb.__name__}.MultimodalDataItem._resolve_transport_consumer_count on a {transport} proxy (run)"
        )
        return value

    def ack_words(
        self,
        count: int,
        total: int,
        tp_rank: int,
        *,
        transport: str = "cuda_ipc",
        tp_size: int,
        dp_size: int = 1,
        enable_dp_attention: bool = False,
        generation: int = 7,
    ) -> tuple[list[int], list[int]]:
        """(words, values) one acknowledgement of ``count`` writes, as the transport's proxy writes them.

        No clamp here (``clamp`` is the step before). SGLang's own exception (ValueError for a count,
        RuntimeError for a rank outside the slot) propagates. The values say what a word holds after the
        write: the proxy's generation (CUDA IPC) or a flag (VMM).
        """
        ns = topology.parallel(tp_size, dp_size=dp_size, enable_dp_attention=enable_dp_attention, tp_rank=tp_rank)
        proxy = self.proxy(transport, total, generation)
        with ExitStack() as stack:
            for name in ("multimodal.transport.memory_pool", "runtime_context", "utils.cuda_vmm_transport_utils"):
                self._with_parallel(stack, self.source.module(name), ns)
            if transport == "cuda_vmm":
                return self._vmm_words(stack, proxy, count, total)
            mp = self.source.module("multimodal.transport.memory_pool")
            written: dict[int, int] = {}
            size = self._word_bytes(transport)

            def write(device_id: int, address: int, value: int, transport_name: str) -> None:
                written[address // size - 1] = int(value)  # the ready word comes first, at offset 0

            why = "recorder for the ack word writes (cuStreamWriteValue32 needs CUDA)"
            stack.enter_context(runtime.patched(self.source, mp, "stream_write_value32", write, why))
            proxy._acknowledge_on_stream(0, 0, count)
        self.sources["ack_words[cuda_ipc]"] = (
            f"{type(proxy).__module__}.CudaIpcTensorTransportProxy._acknowledge_on_stream "
            "(StreamOrderedPoolConsumerMixin, run; stream writes recorded)"
        )
        return sorted(written), [written[w] for w in sorted(written)]

    def _vmm_words(self, stack: ExitStack, proxy: Any, count: int, total: int) -> tuple[list[int], list[int]]:
        import torch

        size = self._word_bytes("cuda_vmm")
        memory = torch.zeros(total * size + 1, dtype=torch.uint8)
        self.source.patch(
            f"{type(proxy).__module__}.CudaVmmTensorTransportProxy._pool",
            "the imported VMM pool (a CUDA mapping) answered by a zeroed CPU byte tensor, per proxy instance",
        )
        proxy._pool = lambda device_index: types.SimpleNamespace(memory=memory)
        proxy._acknowledge_consumption(0, count)
        words = memory[: total * size].view(torch.int32)
        written = [int(w) for w in torch.nonzero(words).flatten().tolist()]
        self.sources["ack_words[cuda_vmm]"] = (
            f"{type(proxy).__module__}.CudaVmmTensorTransportProxy._acknowledge_consumption "
            "(run on a CPU stand-in for the pool's memory; the words read back)"
        )
        return written, [int(words[w]) for w in written]

    def request_end_releases(self, transport: str, total: int, owner: bool = False) -> list[tuple[int, str]]:
        """The acknowledgements ``MultimodalInputs.release_features()`` makes for one item (count, via what).

        Run on an item whose feature is a recording stand-in: a subclass of the transport's own proxy
        class (so SGLang's ``isinstance(..., CudaIpcTensorTransportProxy)`` checks pass) whose
        ``acknowledge_consumption``, the first step that maps the pool (CUDA), records the count and
        the SGLang frames that led to it. ``owner=True`` gives the item the tensor an owner holds after
        ``reconstruct`` instead. An empty list: the release path acknowledges nothing.
        """
        sb = self.source.module("managers.schedule_batch")
        calls: list[tuple[int, str]] = []
        base = type(self.proxy(transport, total))

        def acknowledge_consumption(self_proxy: Any, consumer_count: Any = 1, *_: Any, **__: Any) -> None:
            count = consumer_count if consumer_count is not None else 1
            calls.append((int(count), runtime.sglang_callers(self.source)))

        recorder = type(f"Recording{base.__name__}", (base,), {"acknowledge_consumption": acknowledge_consumption})
        self.source.patch(
            f"{base.__module__}.{base.__name__}.acknowledge_consumption",
            "a recording subclass of the proxy: maps the pool on CUDA; records the count instead",
        )
        item = runtime.tiny_item(sb)
        if not owner:
            item.feature = self.proxy(transport, total, cls=recorder)
        sb.MultimodalInputs(mm_items=[item]).release_features()
        self.sources[f"request_end_releases[{transport}]"] = (
            f"{sb.__name__}.MultimodalInputs.release_features (run) on a {recorder.__name__} feature"
        )
        return calls


def _pool_count_expression(bp: types.ModuleType) -> tuple[ast.expr, int]:
    """The consumer-count argument of the ``MmItemMemoryPool(...)`` call in the base processor's source."""
    tree = ast.parse(inspect.getsource(bp))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "MmItemMemoryPool"
        ):
            for kw in node.keywords:
                if kw.arg == "consumer_count":
                    return kw.value, node.lineno
            if len(node.args) >= 4:
                return node.args[3], node.lineno
    raise RuntimeError(f"{bp.__name__} has no MmItemMemoryPool(...) call with a consumer count")
