"""What a loaded SGLang does, found by running it (never by version number), and where each answer comes from.

`detect` runs small experiments through `SGLangImpl` and reports what the
code did: whether it defers at all, the contract form its producers write,
where its gate is called and with how many images, whether its consumer
accepts mixed batches, checks grids, and indexes grids globally for any
owner subset (semantics §6.2), its scheduler whitelist, its IPC counts and the
stand-ins its import needed. Each experiment is isolated: a failure is
reported as its error text, never hidden. On an eager-only release (no
deferred path, `Source.has_deferred_path`), the experiments about deferral
say ``"n/a: ..."`` and the rest run on its eager items.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from PIL import Image

from deferlab.impl.sglang import producer, runtime, topology
from deferlab.impl.sglang.sources import GATE
from deferlab.reference.system.profiles import profile

if TYPE_CHECKING:
    from deferlab.impl.sglang.driver import SGLangImpl


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


def _mixed(impl: SGLangImpl) -> dict[str, Any]:
    """Does the consumer accept an owner selection of one deferred and one eager item?

    Where the default call site decides per image, one request mixes the two kinds. A per-request gate
    (the PR) never does: the selection then mixes two requests, a deferred item of this version's own
    (`SGLangImpl.epd_items`) and an eager one (a ``cuda_ipc`` request), as claim C7 builds it.
    """
    cfg = profile("sglang-gate-test-l1")  # in_patch_limit 1: 32x32 defers, 1024x1024 stays eager
    images = [_u8(32, 32), _u8(1024, 1024)]
    out = impl.process(images, cfg)
    items = list(out.items)
    result: dict[str, Any] = {"deferred": list(out.deferred)}
    if len(set(out.deferred)) < 2:
        items = [impl.epd_items(images, cfg)[0], impl.process(images, cfg, transport="cuda_ipc").items[1]]
        result["selection"] = "two requests: a deferred item and an eager (cuda_ipc) one"
    try:
        feats = impl.materialize(items, [0, 1], cfg)
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
    """semantics §6.2: materialize non-prefix owner lists; is every image given its own features?

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
    if counts.pool_kind == "counter":  # the PR-era shared-memory counter pool (no ack words, no VMM pool)
        counter = counts.counter
        out = {
            "pool": "counter",
            "K_p (recycle threshold) tp8": _try(lambda: counter.recycle_threshold(8)),
            "K_p (recycle threshold) tp8 dp2 attn-dp": _try(lambda: counter.recycle_threshold(8, 2, True)),
            "K_c tp8 attn_tp4 dp2 attn-dp": _try(lambda: counts.consumer_requested(8, 4, 2, True)),
            "owner adds (K_c 8)": _try(lambda: counter.owner_ack(8)),
            "non-owner release": _try(lambda: counter.request_end_releases()),
        }
        out["sources"] = dict(counts.sources)
        return out
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
    key = src.deferred_key

    @functools.cache  # one request-path run serves both experiments below (neither changes its items)
    def request_items() -> list[Any]:
        return producer.produce(src, [_u8(32, 32)], k3, "cpu", "cpu", "request").items

    feats["has_deferred_feature"] = _try(
        lambda: producer.gate_calls(src, [_u8(32, 32)], k3, "cpu", True, "request")[0].result
    )
    feats["contract_form"] = _try(
        lambda: contract_form(impl.process([_u8(32, 32)], k3).items[0].model_specific_data[key])
    )
    feats["contract_form_request_path"] = _try(lambda: contract_form(request_items()[0].model_specific_data[key]))
    feats["epd_contract_form"] = (
        _try(lambda: contract_form(impl.epd_items([_u8(32, 32)], k3)[0].model_specific_data[key]))
        if impl.capabilities.epd_producer
        else "none: no EPD deferred producer (its EPD encoder preprocesses eagerly and ships embeddings)"
    )
    feats["gate_call_sites"] = _try(lambda: gate_call_sites(impl))
    feats["gate_calls_seen"] = {
        path: _try(
            lambda path=path: [
                (c.site, c.n_images, c.result)
                for c in producer.gate_calls(src, [_u8(32, 32), _u8(40, 30)], k3, "cpu", True, path)
            ]
        )
        for path in impl.capabilities.paths
    }
    feats["capabilities"] = {
        "gate_sites": [f"{path}: KimiK3ImageProcessor.{method}" for path, method in impl.capabilities.gate_sites],
        "epd_producer": impl.capabilities.epd_producer,
        "deferred_builder": impl.capabilities.deferred_builder,
        "why": list(impl.capabilities.why),
    }
    feats["mixed_batches"] = _try(lambda: _mixed(impl))
    feats["grid_check"] = _try(lambda: _grid_check(impl))
    feats["owner_subsets"] = _try(lambda: _owner_subsets(impl))
    feats["non_epd_consumer_reads_backend_ok"] = _try(lambda: tuple(impl.materialize(request_items(), [0], k3).shape))
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
    feats["topology_reads_unanswered"] = sorted(topology.MISSES)  # names SGLang asked the stand-ins for, not given
    return feats


def _standin_names(required: Sequence[str]) -> dict[str, list[str]]:
    """Per module the driver runs: the global names that are stand-ins (calling any of them would raise)."""
    import sys

    from deferlab.impl.loader.standins import is_standin

    out = {}
    for name in required:
        module = sys.modules.get(name)
        if module is not None:
            out[name] = sorted(
                k for k, v in vars(module).items() if is_standin(v) or getattr(v, "__deferlab_standin__", False)
            )
    return out
