"""The tokenizer side, run through SGLang's own call sites: the gate where it is called, and the items it writes.

Why through the call sites and not the gate alone: from 0.5.18 the gate is
called in two places with different granularity (once per request on the
uncached path, once per image on the artifact path, SGLang's default for K3
while its preprocess cache is on). `gate_calls` runs the real site function
with the real gate instrumented on the processor *instance* (the class is
untouched) and records every call; everything after the decision that needs
CUDA or a checkpoint's HF processor is stopped or re-routed as recorded in
`runtime`. Which sites a tree has is read off its code (`capabilities`): the
PR as merged calls the gate inside ``process_mm_data_async`` itself and has
no artifact path. An eager-only release (0.5.17) has no gate and one call
site: `eager_only_produce` runs its ``process_mm_data_async``.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import types
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from deferlab.impl.sglang import capabilities, runtime, tokenizer, topology
from deferlab.impl.sglang.sources import Source
from deferlab.reference.system.config import PreprocessConfig

PATHS = capabilities.PATHS


class _Stop(Exception):
    """Raised by an instrumented step once the gate decisions of a site are all recorded."""


@dataclass
class GateCall:
    """One call of the real gate: the site that made it, how many images it saw, what it answered."""

    site: str
    n_images: int
    result: bool


@dataclass
class Produced:
    """What a producer run gives back: SGLang's own items, per-image deferral, the gate calls behind it."""

    items: list[Any]
    deferred: list[bool]
    calls: list[GateCall] = field(default_factory=list)
    output: Any = None


def _instrument_gate(proc: Any, calls: list[GateCall]) -> None:
    real = type(proc)._should_defer_gpu_preprocessing.__get__(proc)

    def gate(images: Any) -> bool:
        result = real(images)
        calls.append(GateCall(sys._getframe(1).f_code.co_name, len(images or []), bool(result)))
        return result

    proc._should_defer_gpu_preprocessing = gate  # instance attribute: the class keeps the real method


def artifact_entries(source: Source, proc: Any, images: Sequence[Any]) -> list[Any]:
    """``MediaArtifactInput``s for the artifact path (what SGLang's preprocess cache hands over on misses)."""
    base = source.module("multimodal.media_artifacts.base")
    sb = source.module("managers.schedule_batch")
    identity = source.module("multimodal.cache.identity")
    entries = []
    for image in images:
        digest = "sha256:" + _digest(image)
        key = identity.build_artifact_key(digest, modality="image", processor_fingerprint=proc.processor_fingerprint)
        entries.append(
            base.MediaArtifactInput(content_digest=digest, artifact_key=key, modality=sb.Modality.IMAGE, media=image)
        )
    return entries


def _digest(image: Any) -> str:
    """The content digest the preprocess cache would key ``image`` by (equal content, equal digest).

    A tensor broadcast from one element (every stride 0 but a size-1 dimension's: the gate claims' images of up
    to 16384 x 16384, which allocate one byte) is digested from its shape, dtype and that element, marked as such,
    instead of materializing up to a GiB to hash it: C1's search spent about 50 s per run there."""
    h = hashlib.sha256()
    if isinstance(image, torch.Tensor):
        h.update(repr((tuple(image.shape), str(image.dtype))).encode())
        if image.numel() > 1 and all(st == 0 or n == 1 for n, st in zip(image.shape, image.stride(), strict=True)):
            h.update(b"one element, broadcast:" + image.detach().cpu().reshape(-1)[:1].numpy().tobytes())
            return h.hexdigest()
        h.update(image.detach().cpu().contiguous().numpy().tobytes())
    else:
        h.update(repr((image.mode, image.size)).encode())
        h.update(image.tobytes())
    return h.hexdigest()


def gate_calls(
    source: Source, images: Sequence[Any], config: PreprocessConfig, transport: str, cuda_available: bool, path: str
) -> list[GateCall]:
    """Every call the real gate gets when ``images`` go through the ``path`` call site (as this tree has it)."""
    method = capabilities.of(source).method(path)
    proc = runtime.make_processor(source, config, transport)
    calls: list[GateCall] = []
    _instrument_gate(proc, calls)
    with runtime.gate_cuda(source, cuda_available):
        if path == "artifact":
            wrapper = proc._processor
            wrapper.prepare_image_features = _raise_stop  # eager work comes after every decision: stop there
            try:
                proc.prepare_artifact_batch(artifact_entries(source, proc, images), processor=wrapper)
            except _Stop:
                pass
        else:
            _mock_loading(proc, source, images)
            proc._build_deferred_output = _raise_stop
            proc.process_and_combine_mm_data_async = _raise_stop_async
            try:
                asyncio.run(_request(proc, method, images))
            except _Stop:
                pass
    return calls


async def _request(proc: Any, method: str, images: Sequence[Any]) -> Any:
    """The request path's entry: ``_process_mm_data_uncached`` (3d3194f6c on) or, before that split,
    ``process_mm_data_async`` itself (the PR: it calls the gate directly). Both take (image data, prompt,
    request); the request object is a namespace with no video or audio and no content hashes."""
    request = topology.Answers("request_obj", {"video_data": None, "audio_data": None, "mm_content_hashes": None})
    return await getattr(proc, method)(list(images), tokenizer.prompt_ids(len(images)), request)


def produce(
    source: Source, images: Sequence[Any], config: PreprocessConfig, transport: str, device: str, path: str
) -> Produced:
    """Run the producer of ``path`` for real and return SGLang's items (deferred or eager, per its gate).

    The artifact path runs on a processor built as SGLang's tests build it (`runtime.make_processor`);
    the request path, whose eager branch runs the base processor's whole ``process_and_combine_mm_data``,
    on one built by its own ``__init__`` where that builds here (`request_processor`).
    """
    method = capabilities.of(source).method(path)
    if path == "artifact":
        proc = runtime.make_processor(source, config, transport)
    else:
        proc = request_processor(source, config, transport)
    calls: list[GateCall] = []
    _instrument_gate(proc, calls)
    if transport == "cuda_ipc" and (not torch.cuda.is_available() or not hasattr(proc, "cudaipc_mmfeature_pool")):
        # no GPU, or a processor built without its pool (own __init__ with skip_mm_pool)
        why = "CUDA IPC wrapping needs a GPU and its pool; eager features stay plain tensors (modelled)"
        proc._wrap_tensor_for_cuda_ipc = lambda tensor: tensor
        source.patch("sglang.srt.multimodal.processors.base_processor._wrap_tensor_for_cuda_ipc", why)
    with runtime.gate_cuda(source, True):  # the producer runs on a CUDA server (as DeferlabImpl assumes)
        if path == "artifact":
            wrapper = proc._processor
            wrapper.prepare_image_features = lambda imgs: runtime.eager_image_features(source, wrapper, imgs, device)
            artifacts = proc.prepare_artifact_batch(artifact_entries(source, proc, images), processor=wrapper)
            output = proc.compose_request(tokenizer.prompt_ids(len(images)), artifacts)
        else:
            _mock_loading(proc, source, images)
            _eager_call(source, proc._processor, device)
            output = asyncio.run(_request(proc, method, images))
    key = source.deferred_key
    items = list(output.mm_items)
    return Produced(items, [key in it.model_specific_data for it in items], calls, output)


def epd_produce(source: Source, images: Sequence[Any], config: PreprocessConfig, backend: str) -> Any:
    """SGLang's EPD producer ``prepare_kimi_k3_encoder_inputs`` (its ``EncoderPreprocessOutput``).

    A tree with the deferred path but no EPD deferred producer (the PR as merged: its EPD encoder runs
    the checkpoint's HF processor eagerly and ships embeddings) answers with `deferred_items`, its one
    deferred producer; provenance says so.
    """
    if backend not in ("gpu", "cpu"):
        raise ValueError(f"backend must be 'gpu' or 'cpu', got {backend!r}")
    if not capabilities.of(source).epd_producer:
        return deferred_items(source, images, config).output
    kip = source.module("multimodal.kimi_k3_image_processing")
    processor = types.SimpleNamespace(media_proc_cfg=tokenizer.media_proc_cfg(config))
    return kip.prepare_kimi_k3_encoder_inputs(list(images), processor, use_gpu_preprocessing=backend == "gpu")


def deferred_items(source: Source, images: Sequence[Any], config: PreprocessConfig) -> Produced:
    """The request path's own deferred builder ``_build_deferred_output``, run on ``images`` past the gate.

    For a tree without an EPD deferred producer: the deferred items it can write at all (what its
    request path writes when its gate defers), so a claim that needs deferred items for images the gate
    would keep eager still gets this version's own items. Loading is mocked as on the request path.
    """
    proc = runtime.make_processor(source, config, "cpu")
    bp = source.module("multimodal.processors.base_processor")
    ids = tokenizer.prompt_ids(len(images))
    base = bp.BaseMultiModalProcessorOutput(input_text=ids, input_ids=ids, images=list(images))
    output = proc._build_deferred_output(base)
    return Produced(list(output.mm_items), [True] * len(output.mm_items), [], output)


def eager_only_produce(
    source: Source,
    images: Sequence[Any],
    config: PreprocessConfig,
    transport: str,
    device: str,
    placeholders: int | None = None,
) -> Produced:
    """An eager-only release's producer: ``KimiK3ImageProcessor.process_mm_data_async`` run as shipped.

    The processor is built by its own ``__init__`` (`_eager_only_processor`). There is no gate: every
    image is preprocessed by the wrapper's own GPU branch (on ``device``, see `_eager_call`), split
    into one item per image by SGLang's own ``get_new_expanded_mm_items``, with FP32 features;
    ``deferred`` is all False. Image loading is mocked as for later versions. The prompt holds
    ``placeholders`` image tokens (None: one per image).
    """
    proc = own_processor(source, config, transport)
    if proc.use_cuda_ipc and str(device).startswith("cuda"):
        # no pool was built (skip_mm_pool): a pool that is always full sends every CUDA feature down
        # SGLang's own pool-miss fallback in _wrap_tensor_for_cuda_ipc (a plain CPU tensor)
        proc.cudaipc_mmfeature_pool = types.SimpleNamespace(return_a_slice_tensor_with_flag=lambda t: (None, None, 0))
        source.patch(
            "sglang.srt.multimodal.processors.base_processor.BaseMultimodalProcessor.cudaipc_mmfeature_pool",
            "modelled: a CUDA IPC pool that is always full, so CUDA features take SGLang's pool-miss fallback (.cpu())",
        )
    _eager_call(source, proc._processor, device)
    _mock_loading(proc, source, images)
    ids = tokenizer.prompt_ids(len(images) if placeholders is None else placeholders)
    output = run_kept(proc.process_mm_data_async(list(images), ids, None))
    items = list(output.mm_items)
    return Produced(items, [False] * len(items), [], output)


def request_produce(
    source: Source, images: Sequence[Any], config: PreprocessConfig, placeholders: int, transport: str, device: str
) -> Produced:
    """The processor's whole entry ``process_mm_data_async`` on a prompt of ``placeholders`` image tokens.

    Why the entry and not a call site: the request's counts are checked there (placeholders against the
    image data, then the loaded images against it, in ``_process_mm_data_uncached`` from 3d3194f6c on),
    before any gate. The processor is the request path's (`request_processor`); where it was built
    without its own ``__init__`` it gets a preprocess cache that is off, so the entry takes the cache-off
    path (the request path, as a server started without the cache does). Loading is mocked as there.
    """
    if not source.has_deferred_path:
        return eager_only_produce(source, images, config, transport, device, placeholders)
    proc = request_processor(source, config, transport)
    if not hasattr(proc, "mm_preprocess_cache"):
        proc.mm_preprocess_cache = types.SimpleNamespace(enabled=False)
        source.patch(
            "sglang.srt.multimodal.processors.kimi_k3.KimiK3ImageProcessor.mm_preprocess_cache",
            "a preprocess cache that is off (the processor was built without its own __init__): "
            "process_mm_data_async takes the cache-off request path",
        )
    calls: list[GateCall] = []
    _instrument_gate(proc, calls)
    _mock_loading(proc, source, images)
    _eager_call(source, proc._processor, device)
    request = topology.Answers(
        "request_obj", {"video_data": None, "audio_data": None, "mm_content_hashes": None, "mm_hashes": None}
    )
    with runtime.gate_cuda(source, True):  # the producer runs on a CUDA server (as `produce`)
        output = run_kept(proc.process_mm_data_async(list(images), tokenizer.prompt_ids(placeholders), request))
    items = list(output.mm_items)
    return Produced(items, [source.deferred_key in it.model_specific_data for it in items], calls, output)


def request_processor(source: Source, config: PreprocessConfig, transport: str) -> Any:
    """The request path's processor: built by its own ``__init__`` (`own_processor`) where that runs on a
    server-args namespace (the PR and 418975ba6: every base attribute the eager branch reads is then real),
    else as SGLang's tests build it (`runtime.make_processor`: the deferred branch runs, the eager branch
    needs the serving stack). Which one, and why, is recorded on the source once.
    """
    if source.__dict__.get("_own_init_error") is None:
        try:
            return own_processor(source, config, transport)
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            source.__dict__["_own_init_error"] = f"{type(e).__name__}: {e}"
            source.patch(
                "sglang.srt.multimodal.processors.kimi_k3.KimiK3ImageProcessor.__init__",
                "request path: the processor's own __init__ needs the serving stack here "
                f"({type(e).__name__}: {e}); built with object.__new__ as for the artifact path instead, "
                "so its eager branch (process_and_combine_mm_data) cannot run",
            )
    proc = runtime.make_processor(source, config, transport)
    reason = source.__dict__["_own_init_error"]

    async def eager_branch(*_: Any, **__: Any) -> Any:
        # raised here, in the driver: a gap of ours, never blamed on SGLang by the claim harness
        raise NotImplementedError(
            f"{source.name}: the request path's eager branch needs the processor's own __init__, which needs "
            f"the serving stack here ({reason})"
        )

    proc.process_and_combine_mm_data_async = eager_branch
    return proc


def own_processor(source: Source, config: PreprocessConfig, transport: str = "cpu") -> Any:
    """A ``KimiK3ImageProcessor`` built by its own ``__init__`` (and its base class's): an eager-only
    release's producer, and the request path of any version.

    It builds its wrapper from the checkpoint-style ``media_proc_cfg`` and reads a few server settings; a
    namespace gives them: the transport, no ``mm_process_config``, one I/O and one processor worker (so
    preprocessing runs inline), the preprocess cache off (where the tree has one), and ``skip_mm_pool=True`` (SGLang's own switch: no CUDA IPC pool, which
    needs a GPU; a CPU feature then passes ``_wrap_tensor_for_cuda_ipc`` unchanged, as it does in SGLang).
    Its I/O and CPU executors are shut down unused: images arrive decoded.
    """
    pk3 = source.module("multimodal.processors.kimi_k3")
    media = types.SimpleNamespace(media_proc_cfg=tokenizer.media_proc_cfg(config))
    hf = types.SimpleNamespace(tokenizer=tokenizer.StubTokenizer(), image_processor=None, media_processor=media)
    hf_config = types.SimpleNamespace(media_placeholder_token_id=tokenizer.IMAGE_TOKEN_ID)
    server_args = types.SimpleNamespace(
        mm_feature_transport=transport,
        disable_fast_image_processor=False,
        skip_tokenizer_init=False,
        mm_process_config={},
        mm_io_worker_num=1,
        mm_processor_worker_num=1,
        # the preprocess cache off (trees that have one, e8c7dddfa on): the request path is the cache-off path
        mm_preprocess_cache_size_mb=0,
    )
    proc = pk3.KimiK3ImageProcessor(hf_config, server_args, hf, None, skip_mm_pool=True)
    for name in ("io_executor", "cpu_executor"):
        executor = getattr(proc, name, None)
        if executor is not None:
            executor.shutdown(wait=False)
    return proc


def _eager_call(source: Source, wrapper: Any, device: str) -> None:
    """Make the wrapper take its GPU branch on ``device`` when the processor calls it (an eager-only
    release's producer, and the request path's eager branch of any version with one).

    SGLang's base processor calls ``processor.__call__(...)``; the instance gets the class's own ``__call__``
    with ``torch.cuda.is_available()`` answering True, and its own ``_gpu_call`` with ``_k3_to_cuda_chw``
    staging to ``device`` (`runtime.eager_stager`); the wrapper's ``_get_gpu_norm_tensors(device=device)``
    is called first (it caches; its default device is 'cuda'). The class is untouched.
    """
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return
    cls = type(wrapper)
    wrapper._get_gpu_norm_tensors(device=device)
    wrapper._gpu_call = runtime.run_with_globals(
        cls._gpu_call.__get__(wrapper), _k3_to_cuda_chw=runtime.eager_stager(source, device)
    )
    wrapper.__call__ = runtime.run_with_globals(cls.__call__.__get__(wrapper), torch=runtime.CudaView())
    source.patch(
        f"{cls.__module__}.{cls.__name__}.__call__",
        f"eager path on {device}: own __call__ with torch.cuda.is_available() -> True, own _gpu_call with "
        f"_k3_to_cuda_chw staging to {device}, _get_gpu_norm_tensors(device={device!r}) called first",
    )


def _mock_loading(proc: Any, source: Source, images: Sequence[Any]) -> None:
    """The request path's image loading (URLs, bytes, nvJPEG) replaced by handing over decoded images.

    SGLang's producer tests mock the loader the same way; the base output is SGLang's own dataclass.
    """
    bp = source.module("multimodal.processors.base_processor")

    async def load(*_: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids") or kwargs.get("prompt")
        return bp.BaseMultiModalProcessorOutput(input_text=ids, input_ids=ids, images=list(images))

    proc.fast_load_mm_data = load
    proc.load_mm_data = load
    source.patch(
        f"{bp.__name__}.BaseMultimodalProcessor.fast_load_mm_data", "image loading: decoded images handed over"
    )


def run_kept(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coro)``'s result, without the main task holding it.

    Why: on leaving, ``asyncio.run`` compares the SIGINT handler it installed, and CPython's
    ``signal.getsignal`` formats that handler's repr, which includes the main task's result: a request's
    processor output with hundreds of float feature tensors took ~12 s to print (0.5.17, 257 images).
    """
    kept: list[Any] = []

    async def main() -> None:
        kept.append(await coro)

    asyncio.run(main())
    return kept[0]


def _raise_stop(*_: Any, **__: Any) -> Any:
    raise _Stop


async def _raise_stop_async(*_: Any, **__: Any) -> Any:
    raise _Stop
