"""Where each answer of `SGLangImpl` comes from: real SGLang code, patched, modelled (and why), or absent.

Why a module of its own: the provenance lines depend on what the loaded tree
has (its gate call sites, whether it has an EPD deferred producer, whether it
is eager-only), all read off the code by `capabilities` and
`Source.has_deferred_path`. `of` answers per function; `per_method` per seam
method, the form copied into every recorded claim verdict. It is handed the
driver, never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from deferlab.impl.sglang.driver import SGLangImpl

_REAL = {
    "navit_resize_config": "real: sglang.srt.multimodal.processors.kimi_k25.navit_resize_config",
    "to_chw_uint8": "real: sglang.srt.multimodal.kimi_k3_image_processing.to_chw_uint8",
    "resize": "real: sglang.srt.multimodal.processors.kimi_k25._resize_bicubic_if_needed",
    "fill_transparent_bg": "real: sglang.srt.multimodal.kimi_k3_image_processing.fill_transparent_bg",
    "normalization_tensors": "real: sglang.srt.multimodal.kimi_k3_image_processing.normalization_tensors",
    "normalize_and_patchify": (
        "real: sglang.kernels.ops.mm.process.normalize_and_patchify; on CPU its own torch fallback "
        "(_normalize_and_patchify_torch). The Triton kernel: modelled: needs CUDA + triton (triton is a stand-in here)"
    ),
    "preprocess": (
        "real: sglang.srt.multimodal.processors.kimi_k25._gpu_preprocess_images with the consumer's hooks "
        "(to_chw_uint8(image, device), fill_transparent_bg)"
    ),
    "gate_bytes": "real: the gate's own raw_bytes / processed_bytes locals, read when it returns",
    "process (eager items)": (
        "real on CUDA; on CPU the wrapper's own prepare_image_features code with torch.cuda.is_available() -> True "
        "and _k3_to_cuda_chw's own code staging to the CPU (its .cuda() and to_chw_uint8(device='cuda') resolve there)"
    ),
    "epd_items": "real: sglang.srt.multimodal.kimi_k3_image_processing.prepare_kimi_k3_encoder_inputs",
    "process_request": (
        "real: sglang.srt.multimodal.processors.kimi_k3.KimiK3ImageProcessor.process_mm_data_async (the cache-off "
        "request path; image loading mocked, decoded images handed over)"
    ),
    "materialize": (
        "real: the load_local_pixel_values closure of KimiK3ForConditionalGeneration.get_image_feature "
        "(captured from the DP runner call, as SGLang's tests capture it); the tower is a stub (device, patch size, dtype)"
    ),
    "vision_dp owners": "real: run_dp_sharded_mrope_vision_model up to its loader call, per rank (get_parallel patched)",
    "vision_dp_embeddings": (
        "real: sglang.srt.multimodal.mm_utils.run_dp_sharded_mrope_vision_model to its return, on every rank (one "
        "thread each, get_parallel answered per thread); the tower is the caller's stand-in and the attention-TP "
        "group's all_gather / broadcast a thread barrier (impl.sglang.vision_dp)"
    ),
    "assign_owners": "real: sglang.srt.multimodal.mm_utils.get_dp_encoder_lb_assignment",
    "local_item_indices": "real: sglang.srt.multimodal.encoder_preprocessing.EncoderPreprocessOutput.local_item_indices",
    "ipc producer_total": "real: see IPCCounts.sources (get_mm_feature_consumer_count / MmItemMemoryPool argument / get_vmm_feature_consumer_count)",
    "ipc consumer_requested": "real: the model loader's reconstruct(..., ipc_consumer_count) argument, recorded",
    "ipc resolve": "real: MultimodalDataItem._resolve_transport_consumer_count + StreamOrderedPoolConsumerMixin._acknowledge_on_stream",
    "items": "real: sglang.srt.managers.schedule_batch.MultimodalDataItem (msgspec.Struct versions: functional msgspec stand-in)",
}
_MODELLED = {
    "deliver": "modelled: CPU transport as a pickle round trip per rank (SGLang's shm / msgspec-msgpack paths need its serving stack)",
    "vision_dp gather": "modelled: torch.distributed all_gather / broadcast + request-order reassembly",
    "vision_dp h2d_copies": "modelled: no device copy exists on a CPU run; counted from the whitelist (owner-only) or every tensor feature",
    "cuda ipc": "modelled: CUDA IPC / VMM proxies, pool slots and stream waits need CUDA; only the counts run (IPCCounts)",
    "triton kernel": "modelled: normalize_and_patchify's Triton path needs CUDA (CPU runs SGLang's torch fallback)",
    "nvjpeg decode": "modelled: images arrive decoded (PIL or uint8 tensors); nvJPEG decoding is not run",
    "epd cpu backend materialization": "modelled: needs the checkpoint's HF image processor (not shipped with SGLang)",
    "item identity": "modelled: processor_fingerprint is a fixed per-config string (SGLang builds it from server config)",
}


_PK3 = "sglang.srt.multimodal.processors.kimi_k3"
_EAGER_ONLY = {
    "to_chw_uint8": (
        f"real: {_PK3}._k3_to_cuda_chw (the eager stager; its own code with .cuda() resolving to the run's device)"
    ),
    "fill_transparent_bg": f"real: {_PK3}._fill_transparent_bg",
    "normalization_tensors": (
        f"real: {_PK3}.KimiK3GPUProcessorWrapper._get_gpu_norm_tensors (kimi_k25.KimiGPUProcessorWrapper's, "
        "built by its own __init__ with the statistics)"
    ),
    "preprocess": (
        "real: sglang.srt.multimodal.processors.kimi_k25._gpu_preprocess_images with the eager wrapper's hooks "
        "(_k3_to_cuda_chw on the run's device, _fill_transparent_bg), as its _gpu_call passes them"
    ),
    "gate (defer_decisions)": (
        f"modelled: no gate exists in this version ({_PK3}.KimiK3ImageProcessor has no "
        "_should_defer_gpu_preprocessing): every request is preprocessed eagerly, so [False] per image"
    ),
    "gate_bytes": "absent: no gate, so no byte counts (NotImplementedError)",
    "process (deferred items)": "absent: no deferred producer in this version (every item is eager)",
    "process (eager items)": (
        f"real: {_PK3}.KimiK3ImageProcessor.process_mm_data_async (built by its own __init__ from a server-args "
        "namespace, skip_mm_pool=True), the base processor's process_and_combine_mm_data and "
        "get_new_expanded_mm_items; the wrapper's own __call__ / _gpu_call with torch.cuda.is_available() -> True "
        "and _k3_to_cuda_chw staging to the run's device; image loading replaced by decoded images"
    ),
    "epd_items": "absent: no EPD producer in this version (prepare_kimi_k3_encoder_inputs; NotImplementedError)",
    "materialize": (
        "real: the load_local_pixel_values closure of KimiK3ForConditionalGeneration.get_image_feature (captured "
        "from the DP runner call); get_parallel / get_server_args answered for its IPC count; the tower is a stub"
    ),
    "epd cpu backend materialization": "absent: no EPD path in this version",
}


def _call_sites(impl: SGLangImpl) -> dict[str, str]:
    """The provenance lines that name this tree's own call sites and producers (`impl.sglang.capabilities`)."""
    caps = impl.capabilities
    sites = ", ".join(f"{m} ({'per image' if p == 'artifact' else 'per request'})" for p, m in caps.gate_sites)
    out = {
        "gate (defer_decisions)": (
            f"real: KimiK3ImageProcessor._should_defer_gpu_preprocessing, called by its own call site: {sites}"
        ),
        "process (deferred items)": "real: "
        + "; ".join(
            "prepare_artifact_batch + compose_request (artifact path)"
            if p == "artifact"
            else f"{m} -> _build_deferred_output (request path)"
            for p, m in caps.gate_sites
        )
        + "; image loading replaced by decoded images (as SGLang's tests mock it)",
    }
    if "artifact" not in caps.paths:
        out["process (eager items)"] = (
            f"real: KimiK3ImageProcessor.{caps.method('request')} (the processor built by its own __init__ from a "
            "server-args namespace, skip_mm_pool=True), the base processor's process_and_combine_mm_data; the "
            "wrapper's own __call__ / _gpu_call with torch.cuda.is_available() -> True and _k3_to_cuda_chw staging "
            "to the run's device; image loading replaced by decoded images"
        )
    if not caps.epd_producer:
        out["epd_items"] = (
            "modelled: this version has no EPD deferred producer (kimi_k3_image_processing has no "
            "prepare_kimi_k3_encoder_inputs: its EPD encoder preprocesses with the checkpoint's HF processor and "
            "ships embeddings); both backends are answered with the one deferred producer it has, the request "
            "path's _build_deferred_output, run on the images past the gate"
        )
    return out


# Seam method -> the function provenance keys (`of`) that describe it.
METHOD_KEYS = {
    "to_chw_uint8": ("to_chw_uint8",),
    "resize": ("resize",),
    "fill_transparent_bg": ("fill_transparent_bg",),
    "normalize_and_patchify": ("normalization_tensors", "normalize_and_patchify"),
    "preprocess": ("preprocess",),
    "gate_bytes": ("gate_bytes",),
    "defer_decisions": ("gate (defer_decisions)",),
    "process": ("process (deferred items)", "process (eager items)", "items"),
    "epd_items": ("epd_items",),
    "deliver": ("deliver",),
    "materialize": ("materialize", "epd cpu backend materialization"),
    "vision_dp": ("vision_dp owners", "vision_dp gather", "vision_dp h2d_copies"),
    "gate_paths": ("gate (defer_decisions)",),
    "defers": ("deferred path",),
    "skip_pre_embed": ("can_skip_pre_embed",),
    "ack_counts": ("ipc producer_total", "ipc consumer_requested", "ipc resolve"),
}


def per_method(impl: SGLangImpl) -> dict[str, str]:
    """Seam method -> its functions' provenance lines joined (``modelled: no provenance recorded`` if none)."""
    raw = of(impl)
    return {
        method: "; ".join(raw[k] for k in keys if k in raw) or "modelled: no provenance recorded"
        for method, keys in METHOD_KEYS.items()
    }


def of(impl: SGLangImpl) -> dict[str, str]:
    """Function / claim -> ``real: ...`` | ``modelled: <reason>`` | ``patched: <what and why>`` | ``absent: ...``.

    ``gate (defer_decisions)`` and ``process (deferred items)`` come from the tree's own call sites
    (`_call_sites`) or, on an eager-only tree, from `_EAGER_ONLY`.
    """
    prov = dict(_REAL)
    prov.update(_MODELLED)
    src = impl.source
    prov["can_skip_pre_embed"] = f"real: {src.whitelist_module}._can_skip_pre_embed_feature_move"
    prov.update(_call_sites(impl) if src.has_deferred_path else _EAGER_ONLY)
    prov["deferred path"] = "real: read off the loaded code: " + "; ".join(
        f"{k} {'present' if v else 'absent'}" for k, v in src.deferred_parts.items()
    )
    for record in impl.source.stand_ins:
        if record.kind == "patched":
            prov[f"patched {record.module}"] = f"patched: {record.why}"
    if not torch.cuda.is_available():
        prov["device"] = "modelled: no CUDA here; every device step ran on the CPU"
    return prov
