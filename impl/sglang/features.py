"""What a loaded SGLang does, found by running it (never by version number), and where each answer comes from.

`detect` runs small experiments through `SGLangImpl` and reports what the
code did: whether it defers at all, the contract form its producers write,
where its gate is called and with how many images, whether its consumer
accepts mixed batches, checks grids, and indexes grids globally for any
owner subset (facts 13.25), its scheduler whitelist, its IPC counts and the
stand-ins its import needed. Each experiment is isolated: a failure is
reported as its error text, never hidden. On an eager-only release (no
deferred path, `Source.has_deferred_path`), the experiments about deferral
say ``"n/a: ..."`` and the rest run on its eager items.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from PIL import Image

from impl.sglang import producer, runtime
from reference.profiles import profile

if TYPE_CHECKING:
    from impl.sglang.driver import SGLangImpl

GATE = "_should_defer_gpu_preprocessing"


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - an experiment's failure is a finding
        return f"error: {type(e).__name__}: {e}"


def _u8(h: int, w: int, c: int = 3, fill: int = 0) -> torch.Tensor:
    return (
        torch.arange(c * h * w, dtype=torch.int64).remainder(251).add(fill).remainder(256).to(torch.uint8).view(c, h, w)
    )


def contract_form(value: Any) -> dict[str, Any]:
    """ "dict" / "dict+backend" / "dataclass", and the fields, of one item's deferred config."""
    if dataclasses.is_dataclass(value):
        return {
            "form": "dataclass",
            "fields": sorted(f.name for f in dataclasses.fields(value)),
            "type": type(value).__name__,
        }
    if isinstance(value, dict):
        return {"form": "dict+backend" if "backend" in value else "dict", "fields": sorted(value)}
    return {"form": type(value).__name__, "fields": []}


def gate_call_sites(impl: SGLangImpl) -> list[dict[str, Any]]:
    """Every ``self._should_defer_gpu_preprocessing(...)`` call in the K3 processor's source, with its argument."""
    pk3 = impl.source.module("multimodal.processors.kimi_k3")
    tree = ast.parse(inspect.getsource(pk3))
    sites = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == GATE:
                    arg = ast.unparse(node.args[0]) if node.args else ""
                    sites.append({"site": f"{cls.name}.{fn.name}", "line": node.lineno, "argument": arg})
    return sites


def _deferred_key(impl: SGLangImpl) -> str:
    return impl.source.module("multimodal.kimi_k3_image_processing").DEFERRED_PREPROCESSING_KEY


def _mixed(impl: SGLangImpl) -> dict[str, Any]:
    cfg = profile("sglang-gate-test-l1")  # in_patch_limit 1: 32x32 defers, 1024x1024 stays eager
    out = impl.process([_u8(32, 32), _u8(1024, 1024)], cfg)
    result: dict[str, Any] = {"deferred": list(out.deferred)}
    try:
        feats = impl.materialize(out.items, [0, 1], cfg)
        result["accepted"] = True
        result["rows"] = int(feats.shape[0])
    except Exception as e:  # noqa: BLE001
        result["accepted"] = False
        result["error"] = f"{type(e).__name__}: {e}"
    return result


def _grid_check(impl: SGLangImpl) -> dict[str, Any]:
    cfg = profile("kimi-k3")
    impl_items = impl.process([_u8(32, 32)], cfg).items
    item = impl_items[0]  # 32x32 under K3: grid (1, 4, 4); claim (1, 4, 6) and keep the real patch size
    item.model_specific_data["image_grid_thw"] = torch.tensor([[1, 4, 6]], dtype=torch.int64)
    try:
        runtime.capture_loader(impl.source, [item], "cpu", cfg.patch_size)([0])
        return {"present": False}
    except Exception as e:  # noqa: BLE001
        return {"present": "wrong grids" in str(e) or "does not match" in str(e), "error": f"{type(e).__name__}: {e}"}


def _owner_subsets(impl: SGLangImpl) -> dict[str, Any]:
    """facts 13.25: materialize non-prefix owner lists; is every image given its own features?

    The reference is the prefix list ``[0, 1, 2]`` split per image (local positions equal global
    indices there, so even a local-index bug cannot show in it).
    """
    cfg = profile("kimi-k3")
    images = [_u8(28, 28), _u8(56, 84, fill=7), _u8(112, 70, c=4, fill=3)]
    items = impl.process(images, cfg).items
    counts = [int(it.model_specific_data["image_grid_thw"][0].prod()) for it in items]
    parts = impl.materialize(items, [0, 1, 2], cfg).split(counts)
    outcomes = {}
    for owner in ([2, 1], [1, 2], [2, 0], [0, 2], [1, 0, 2], [1], [2]):
        try:
            got = impl.materialize(items, owner, cfg)
            want = torch.cat([parts[i] for i in owner])
            ok = got.shape == want.shape and bool(torch.equal(got, want))
            outcomes[str(owner)] = "correct" if ok else "wrong features"
        except Exception as e:  # noqa: BLE001
            outcomes[str(owner)] = f"raises {type(e).__name__}: {e}"
    return {"dp_owner_lists": outcomes, "global_indexing": all(v == "correct" for v in outcomes.values())}


def _whitelist(impl: SGLangImpl) -> list[str]:
    fn = impl.source.module(impl.source.whitelist_module)._can_skip_pre_embed_feature_move
    names = set()
    for const in fn.__code__.co_consts:
        if isinstance(const, frozenset):
            names |= {c for c in const if isinstance(c, str) and c.endswith("ForConditionalGeneration")}
    return sorted(n for n in names if impl.can_skip_pre_embed(n))


def _ipc(impl: SGLangImpl) -> dict[str, Any]:
    counts = impl.ipc_counts()
    out = {
        "K_p cuda_ipc tp8": _try(lambda: counts.producer_total(8)),
        "K_p cuda_ipc tp8 dp2 attn-dp": _try(lambda: counts.producer_total(8, 2, True)),
        "K_p cuda_vmm tp8 dp2 attn-dp": _try(lambda: counts.producer_total(8, 2, True, transport="cuda_vmm")),
        "K_c tp8 attn_tp4 dp2 attn-dp": _try(lambda: counts.consumer_requested(8, 4, 2, True)),
        "resolve(8, 4)": _try(lambda: counts.resolve(8, 4)),
        "ack ranks (1 of 4, tp_rank 5)": _try(lambda: counts.acknowledged_ranks(1, 4, tp_rank=5)),
        "resolve(2, 4)": _try(lambda: counts.resolve(2, 4)),
    }
    out["sources"] = dict(counts.sources)
    return out


def _eager_items(impl: SGLangImpl) -> dict[str, Any]:
    """What an eager-only producer writes for a uint8 tensor and a keyed RGB image (both transports)."""
    keyed = Image.new("RGB", (30, 20), (9, 9, 9))
    keyed.info["transparency"] = (9, 9, 9)
    out: dict[str, Any] = {}
    for transport in ("cpu", "cuda_ipc"):
        produced = impl.process([_u8(32, 32), keyed], profile("kimi-k3"), transport=transport)
        out[transport] = {
            "deferred": list(produced.deferred),
            "features": [(str(it.feature.dtype), tuple(it.feature.shape)) for it in produced.items],
            "keys": sorted({k for it in produced.items for k in it.model_specific_data}),
        }
    return out


_NO_DEFERRAL = "n/a: no deferred path in this version (eager-only Kimi-K3 processor)"


def detect(impl: SGLangImpl) -> dict[str, Any]:
    """Run every experiment on the loaded version; values are findings or ``"error: ..."`` strings."""
    src = impl.source
    feats: dict[str, Any] = {"name": impl.name, "spec": src.spec, "kind": src.kind, "root": str(src.root)}
    feats["has_deferred_path"] = src.has_deferred_path
    feats["deferred_parts"] = dict(src.deferred_parts)
    if not src.has_deferred_path:
        return _detect_eager_only(impl, feats)
    k3 = profile("kimi-k3")
    key = _deferred_key(impl)
    feats["has_deferred_feature"] = _try(
        lambda: producer.gate_calls(src, [_u8(32, 32)], k3, "cpu", True, "request")[0].result
    )
    feats["contract_form"] = _try(
        lambda: contract_form(impl.process([_u8(32, 32)], k3).items[0].model_specific_data[key])
    )
    feats["contract_form_request_path"] = _try(
        lambda: contract_form(
            producer.produce(src, [_u8(32, 32)], k3, "cpu", "cpu", "request").items[0].model_specific_data[key]
        )
    )
    feats["epd_contract_form"] = _try(
        lambda: contract_form(impl.epd_items([_u8(32, 32)], k3)[0].model_specific_data[key])
    )
    feats["gate_call_sites"] = _try(lambda: gate_call_sites(impl))
    feats["gate_calls_seen"] = {
        path: _try(
            lambda path=path: [
                (c.site, c.n_images, c.result)
                for c in producer.gate_calls(src, [_u8(32, 32), _u8(40, 30)], k3, "cpu", True, path)
            ]
        )
        for path in producer.PATHS
    }
    feats["mixed_batches"] = _try(lambda: _mixed(impl))
    feats["grid_check"] = _try(lambda: _grid_check(impl))
    feats["owner_subsets"] = _try(lambda: _owner_subsets(impl))
    feats["non_epd_consumer_reads_backend_ok"] = _try(
        lambda: tuple(
            impl.materialize(producer.produce(src, [_u8(32, 32)], k3, "cpu", "cpu", "request").items, [0], k3).shape
        )
    )
    return _common(impl, feats)


def _detect_eager_only(impl: SGLangImpl, feats: dict[str, Any]) -> dict[str, Any]:
    """The experiments an eager-only release can answer; the deferral ones say why they cannot."""
    feats["has_deferred_feature"] = False
    for name in ("contract_form", "contract_form_request_path", "epd_contract_form", "mixed_batches"):
        feats[name] = _NO_DEFERRAL
    feats["non_epd_consumer_reads_backend_ok"] = _NO_DEFERRAL
    feats["gate_call_sites"] = _try(lambda: gate_call_sites(impl))  # the source scan: none
    feats["gate_calls_seen"] = {path: "n/a: no gate in this version" for path in producer.PATHS}
    feats["eager_items"] = _try(lambda: _eager_items(impl))
    feats["grid_check"] = _try(lambda: _grid_check(impl))
    feats["owner_subsets"] = _try(lambda: _owner_subsets(impl))
    return _common(impl, feats)


def _common(impl: SGLangImpl, feats: dict[str, Any]) -> dict[str, Any]:
    src = impl.source
    feats["scheduler_whitelist"] = _try(lambda: _whitelist(impl))
    feats["assign_owners [1000,100,200,50] on 2"] = _try(lambda: impl.assign_owners([1000, 100, 200, 50], 2))
    feats["local_item_indices rank1/2"] = _try(lambda: impl.local_item_indices([1000, 100, 200, 50], 1, 2))
    feats["ipc"] = _try(lambda: _ipc(impl))
    feats["pre_pr_eager_staging"] = _try(impl.eager_promotes_rgb_key)  # RGB + key -> RGBA on the eager path?
    feats["stand_ins"] = dict(Counter(r.kind for r in src.stand_ins))
    feats["failed_modules"] = sorted(r.module for r in src.stand_ins if r.kind == "failed")
    feats["missing_top_level"] = sorted({r.module.split(".")[0] for r in src.stand_ins if r.kind == "missing"})
    feats["optional_errors"] = dict(src.optional_errors)
    feats["standin_names_in_modules_run"] = _standin_names(src.required)
    return feats


def _standin_names(required: Sequence[str]) -> dict[str, list[str]]:
    """Per module the driver runs: the global names that are stand-ins (calling any of them would raise)."""
    import sys

    from impl.sglang.standins import is_standin

    out = {}
    for name in required:
        module = sys.modules.get(name)
        if module is not None:
            out[name] = sorted(
                k for k, v in vars(module).items() if is_standin(v) or getattr(v, "__deferlab_standin__", False)
            )
    return out


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
    "gate (defer_decisions)": (
        "real: KimiK3ImageProcessor._should_defer_gpu_preprocessing, called by its own call site "
        "(prepare_artifact_batch per image, or _process_mm_data_uncached per request)"
    ),
    "gate_bytes": "real: the gate's own raw_bytes / processed_bytes locals, read when it returns",
    "process (deferred items)": (
        "real: prepare_artifact_batch + compose_request (artifact path) or _process_mm_data_uncached + "
        "_build_deferred_output (request path); image loading replaced by decoded images (as SGLang's tests mock it)"
    ),
    "process (eager items)": (
        "real on CUDA; on CPU the wrapper's own prepare_image_features code with torch.cuda.is_available() -> True "
        "and _k3_to_cuda_chw staging to the CPU (tensors: .to/unsqueeze/repeat as the shipped stager does)"
    ),
    "epd_items": "real: sglang.srt.multimodal.kimi_k3_image_processing.prepare_kimi_k3_encoder_inputs",
    "materialize": (
        "real: the load_local_pixel_values closure of KimiK3ForConditionalGeneration.get_image_feature "
        "(captured from the DP runner call, as SGLang's tests capture it); the tower is a stub (device, patch size, dtype)"
    ),
    "vision_dp owners": "real: run_dp_sharded_mrope_vision_model up to its loader call, per rank (get_parallel patched)",
    "assign_owners": "real: sglang.srt.multimodal.mm_utils.get_dp_encoder_lb_assignment",
    "local_item_indices": "real: sglang.srt.multimodal.encoder_preprocessing.EncoderPreprocessOutput.local_item_indices",
    "can_skip_pre_embed": "real: sglang.srt.managers.mm_schedule._can_skip_pre_embed_feature_move",
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


def provenance(impl: SGLangImpl) -> dict[str, str]:
    """Function / claim -> ``real: ...`` | ``modelled: <reason>`` | ``patched: <what and why>`` | ``absent: ...``."""
    prov = dict(_REAL)
    prov.update(_MODELLED)
    src = impl.source
    prov["can_skip_pre_embed"] = f"real: {src.whitelist_module}._can_skip_pre_embed_feature_move"
    if src.has_deferred_path:
        prov["deferred path"] = "real: read off the loaded code: " + "; ".join(
            f"{k} present" for k in src.deferred_parts
        )
    else:
        prov.update(_EAGER_ONLY)
        prov["deferred path"] = "real: read off the loaded code: " + "; ".join(
            f"{k} {'present' if v else 'absent'}" for k, v in src.deferred_parts.items()
        )
    for record in impl.source.stand_ins:
        if record.kind == "patched":
            prov[f"patched {record.module}"] = f"patched: {record.why}"
    if not torch.cuda.is_available():
        prov["device"] = "modelled: no CUDA here; every device step ran on the CPU"
    return prov


def format_exception(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()
