"""IPC acknowledgement counts from SGLang's own code, to feed the simulator's IPC state machine (SPEC 8).

Three numbers decide whether a GPU feature-pool slot is ever freed: the
producer's total consumer count K_p, the count a consumer requests K_c, and
what the pool does with K_c (clamp, then "one consumer or the whole group").
Each method below runs the code the loaded version has for it; `sources`
says which function (or expression) each number came from, per call.
Parallel state is provided the way SGLang's unit tests provide it: the
module's ``get_parallel`` (and ``configured_tp_size``) answer from a namespace.
"""

from __future__ import annotations

import ast
import inspect
import types
from contextlib import ExitStack
from typing import Any

from impl.sglang import runtime
from impl.sglang.sources import Source


class _Stop(Exception):
    """Raised by a recorder once the value we came for has been seen."""


def parallel_state(
    tp_size: int,
    attn_tp_size: int | None = None,
    dp_size: int = 1,
    enable_dp_attention: bool = False,
    tp_rank: int = 0,
) -> types.SimpleNamespace:
    """Every name SGLang's count code reads from ``get_parallel()`` across 0.5.18-0.5.23."""
    attn = attn_tp_size if attn_tp_size is not None else (tp_size // dp_size if enable_dp_attention else tp_size)
    return types.SimpleNamespace(
        tp_size=tp_size,
        attn_tp_size=attn,
        dp_size=dp_size,
        attn_dp_size=dp_size if enable_dp_attention else 1,
        num_dp_ranks=dp_size,
        attn_dp_enabled=enable_dp_attention,
        enable_dp_attention=enable_dp_attention,
        tp_rank=tp_rank,
        attn_tp_rank=tp_rank % max(attn, 1),
    )


class IPCCounts:
    """``producer_total``, ``consumer_requested`` and ``resolve`` as the loaded SGLang computes them."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.sources: dict[str, str] = {}

    def _with_parallel(self, stack: ExitStack, module: types.ModuleType, ns: types.SimpleNamespace) -> None:
        why = "parallel state for the count (SGLang's tests patch get_parallel the same way)"
        if "get_parallel" in module.__dict__:
            stack.enter_context(runtime.patched(self.source, module, "get_parallel", lambda: ns, why))
        if "configured_tp_size" in module.__dict__:
            stack.enter_context(runtime.patched(self.source, module, "configured_tp_size", lambda: ns.tp_size, why))

    # -- K_p ---------------------------------------------------------------------------------------------------
    def producer_total(
        self, tp_size: int, dp_size: int = 1, enable_dp_attention: bool = False, transport: str = "cuda_ipc"
    ) -> int:
        """Consumers a pool slot waits for (the CUDA IPC pool, or the VMM pool with ``transport="cuda_vmm"``)."""
        ns = parallel_state(tp_size, dp_size=dp_size, enable_dp_attention=enable_dp_attention)
        if transport == "cuda_vmm":
            vmm = self.source.module("utils.cuda_vmm_transport_utils")
            fn = vmm.get_vmm_feature_consumer_count
            args = [types.SimpleNamespace(tp_size=tp_size, dp_size=dp_size)] if inspect.signature(fn).parameters else []
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
        server_args = types.SimpleNamespace(tp_size=tp_size, dp_size=dp_size, enable_dp_attention=enable_dp_attention)
        env = dict(bp.__dict__)
        env["self"] = types.SimpleNamespace(server_args=server_args)
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

        item = item_cls(modality=sb.Modality.IMAGE, feature=_tiny_feature(), model_specific_data=_grid())
        ns = parallel_state(tp_size, attn_tp_size, dp_size, enable_dp_attention)
        with ExitStack() as stack:
            loader = runtime.capture_loader(self.source, [item], "cuda:0", 14, parallel=ns)
            why = "recorder: keeps the count the loader asks for, before any CUDA work"
            stack.enter_context(_class_attr(self.source, item_cls, "reconstruct", recorder, why))
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
        sb = self.source.module("managers.schedule_batch")
        mp = self.source.module("multimodal.transport.memory_pool")
        proxy = types.SimpleNamespace(total_consumer_count=total)
        count = int(sb.MultimodalDataItem._resolve_transport_consumer_count(proxy, requested))
        words: list[int] = []

        def write(device_id: int, address: int, value: int, transport_name: str) -> None:
            words.append(address // mp.CONTROL_WORD_BYTES)

        mixin = mp.StreamOrderedPoolConsumerMixin
        consumer = object.__new__(type("Consumer", (mixin,), {}))
        consumer._init_stream_ordered_consumer(
            ready_byte_offset=0, ack_byte_offset=0, generation=1, total_consumer_count=total, transport_name="CUDA IPC"
        )
        ns = parallel_state(total, tp_rank=tp_rank)
        with ExitStack() as stack:
            why = "recorder for the ack word writes (cuStreamWriteValue32 needs CUDA)"
            stack.enter_context(runtime.patched(self.source, mp, "stream_write_value32", write, why))
            self._with_parallel(stack, mp, ns)
            # some versions import get_parallel inside resolve_consumer_rank: answer there too
            self._with_parallel(stack, self.source.module("runtime_context"), ns)
            consumer._acknowledge_on_stream(0, 0, count)
        self.sources["resolve"] = (
            f"{sb.__name__}.MultimodalDataItem._resolve_transport_consumer_count, then "
            f"{mp.__name__}.StreamOrderedPoolConsumerMixin._acknowledge_on_stream (both run)"
        )
        return count, words


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


class _class_attr:
    """Temporarily replace a class attribute (recorded on the source)."""

    def __init__(self, source: Source, cls: type, name: str, value: Any, why: str) -> None:
        self.source, self.cls, self.name, self.value, self.why = source, cls, name, value, why

    def __enter__(self) -> None:
        self.old = self.cls.__dict__[self.name]
        self.source.patch(f"{self.cls.__module__}.{self.cls.__qualname__}.{self.name}", self.why)
        setattr(self.cls, self.name, self.value)

    def __exit__(self, *exc: Any) -> None:
        setattr(self.cls, self.name, self.old)


def _tiny_feature() -> Any:
    import torch

    return torch.zeros(3, 14, 14, dtype=torch.uint8)


def _grid() -> dict[str, Any]:
    import torch

    return {"image_grid_thw": torch.tensor([[1, 1, 1]], dtype=torch.int64)}
