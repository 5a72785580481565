"""Build SGLang's own objects with as little faking as its unit tests use, and run them on this machine.

Why a module of its own: the processor and the model are big classes whose
constructors start a server (thread pools, CUDA pools, weights). SGLang's own
unit tests build them with ``object.__new__`` and set the few attributes the
method under test reads; we do the same, and every deviation from "SGLang's
code as shipped" is one of three documented moves, each recorded on the
source (`Source.patch`):

* `patched`: a module (or class) attribute swapped for the duration of a call
  (``is_cuda`` for the gate, ``get_parallel`` for the DP runner, as SGLang's
  tests do; `answer_topology` for the parallel state count code reads);
* `run_with_globals`: an SGLang function's *own code object* run with one or
  two global names resolving differently (e.g. the eager stager's ``.cuda()``
  mapped to the CPU), so the rest of its body is exactly as shipped; an
  eager-only release's stager (`eager_stager`) keeps even its PIL branch: its
  ``torch.from_numpy`` and its tensor input are tensors whose ``.cuda()``
  moves to the run's device;
* `capture_locals`: a function run unchanged while we read a local at return
  (the gate's byte counts, which it never returns).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from deferlab.impl.sglang import topology
from deferlab.impl.sglang.sources import Source
from deferlab.impl.sglang.tokenizer import IMAGE_TOKEN, IMAGE_TOKEN_ID, StubTokenizer, media_proc_cfg
from deferlab.reference.system.config import PreprocessConfig


@contextlib.contextmanager
def patched(source: Source, owner: types.ModuleType | type, name: str, value: Any, why: str) -> Iterator[None]:
    """Swap ``owner.name`` (a module's global or a class's own attribute) for ``value`` during the block.

    Recorded on the source as ``module.name`` or ``module.Class.name``; an attribute the owner did not
    define itself is removed again afterwards (a class then inherits it as before).
    """
    missing = object()
    old = vars(owner).get(name, missing)
    where = owner.__name__ if isinstance(owner, types.ModuleType) else f"{owner.__module__}.{owner.__qualname__}"
    source.patch(f"{where}.{name}", why)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if old is not missing:
            setattr(owner, name, old)
        elif name in vars(owner):
            delattr(owner, name)


@contextlib.contextmanager
def answer_topology(
    source: Source, module: types.ModuleType, names: Sequence[str], state: topology.Topology, why: str
) -> Iterator[None]:
    """``module``'s ``names`` (of ``get_parallel``, ``configured_tp_size``, ``get_server_args``) answer for the
    topology ``state`` during the block, as SGLang's tests patch ``get_parallel``: no server runs here.

    ``get_server_args`` answers only the topology fields of ``ServerArgs`` (`topology.server_args`).
    """
    answers: dict[str, Callable[[], Any]] = {
        "get_parallel": lambda: state,
        "configured_tp_size": lambda: state.tp_size,
        "get_server_args": lambda: topology.server_args(state.tp_size, state.dp_size, state.enable_dp_attention),
    }
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(patched(source, module, name, answers[name], why))
        yield


def sglang_callers(source: Source) -> str:
    """The SGLang functions that led to the caller's caller, innermost first (``"a <- b <- c"``).

    For a recorder that stands in for an SGLang method: which of SGLang's own paths called it.
    """
    root = str(source.root)
    frames, frame = [], sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frames.append(frame.f_code.co_name)
        frame = frame.f_back
    return " <- ".join(frames)


def run_with_globals(fn: Callable[..., Any], **overrides: Any) -> Callable[..., Any]:
    """``fn``'s own code with some global names resolving to ``overrides`` (its module is untouched)."""
    inner = getattr(fn, "__func__", fn)
    glb = dict(inner.__globals__)
    glb.update(overrides)
    clone = types.FunctionType(inner.__code__, glb, inner.__name__, inner.__defaults__, inner.__closure__)
    clone.__kwdefaults__ = inner.__kwdefaults__
    if hasattr(fn, "__self__"):
        return types.MethodType(clone, fn.__self__)
    return clone


def capture_locals(fn: Callable[..., Any], names: Sequence[str], *args: Any, **kwargs: Any) -> tuple[Any, dict]:
    """Call ``fn`` unchanged; also return the values ``names`` had in its frame when it returned."""
    code = getattr(fn, "__func__", fn).__code__
    seen: dict[str, Any] = {}

    def profiler(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            seen.update({n: frame.f_locals[n] for n in names if n in frame.f_locals})

    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.setprofile(old)
    return result, seen


class _CudaTo(torch.Tensor):
    """A tensor whose ``.cuda()`` moves it to ``_device`` and gives back a plain tensor (see `eager_stager`)."""

    _device = "cpu"

    def cuda(self, *args: Any, **kwargs: Any) -> torch.Tensor:  # type: ignore[override]
        return self.as_subclass(torch.Tensor).to(self._device)


@functools.lru_cache(maxsize=8)
def _cuda_to(device: str) -> type[_CudaTo]:
    return type(f"CudaTo_{device.replace(':', '_')}", (_CudaTo,), {"_device": device})


class _HostNumpyTorch(types.ModuleType):
    """``torch`` whose ``from_numpy`` gives a `_CudaTo` tensor (everything else is the real torch)."""

    def __init__(self, cls: type[_CudaTo]) -> None:
        super().__init__("torch")
        self.from_numpy = lambda array: torch.from_numpy(array).as_subclass(cls)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def eager_stager(source: Source, device: str) -> Callable[[Any], Any]:
    """The wrapper's eager ``_k3_to_cuda_chw``, its own code, staging to ``device`` instead of CUDA.

    Its PIL branch (the alpha predicate, ``convert``, ``from_numpy``, ``permute``) and its tensor branch
    (unsqueeze, repeat, no dtype check) run as shipped; only the ``.cuda()`` they end or start with
    resolves to ``.to(device)``: ``torch.from_numpy`` and the tensor input are `_CudaTo` tensors.
    """
    pk3 = source.module("multimodal.processors.kimi_k3")
    overrides: dict[str, Any] = {}
    real_to_chw = pk3.__dict__.get("to_chw_uint8")
    if real_to_chw is not None:  # from the PR on, its PIL branch is ``to_chw_uint8(image, device="cuda")``
        target = str(device)  # not the lambda's own ``device`` (the call site passes "cuda")
        overrides["to_chw_uint8"] = lambda image, device=None: real_to_chw(image, device=target)
    stage = on_device(pk3._k3_to_cuda_chw, str(device), **overrides)
    source.patch(
        f"{pk3.__name__}._k3_to_cuda_chw",
        f"own code run with .cuda() resolving to .to({device!r}) (torch.from_numpy and the tensor input give "
        "tensors whose .cuda() moves there; a PIL image goes to the real to_chw_uint8 with that device instead "
        "of 'cuda'); every other line as shipped",
    )
    return stage


def on_device(fn: Callable[..., Any], device: str, **overrides: Any) -> Callable[..., Any]:
    """``fn``'s own code with every ``.cuda()`` it makes resolving to ``.to(device)``: ``torch.from_numpy``
    gives, and each tensor argument becomes, a tensor whose ``.cuda()`` moves there; ``overrides`` are further
    global names (`run_with_globals`). What it returns is a plain tensor again."""
    cls = _cuda_to(str(device))
    own = run_with_globals(fn, torch=_HostNumpyTorch(cls), **overrides)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = own(*(a.as_subclass(cls) if isinstance(a, torch.Tensor) else a for a in args), **kwargs)
        return out.as_subclass(torch.Tensor) if isinstance(out, torch.Tensor) else out

    return call


def eager_norm_tensors(source: Source, mean: Sequence[float], std: Sequence[float], device: str) -> Any:
    """An eager-only release's normalization constants: the K3 wrapper's own ``_get_gpu_norm_tensors(device)``.

    The wrapper is built by its own ``__init__`` with these statistics (geometry irrelevant to the constants).
    """
    pk3 = source.module("multimodal.processors.kimi_k3")
    hf = types.SimpleNamespace(tokenizer=StubTokenizer(), image_processor=None, media_processor=None)
    wrapper = pk3.KimiK3GPUProcessorWrapper(
        hf,
        image_token=IMAGE_TOKEN,
        image_token_id=IMAGE_TOKEN_ID,
        patch_size=14,
        merge_kernel_size=2,
        in_patch_limit=16384,
        patch_limit_on_one_side=512,
        fixed_output_tokens=None,
        image_mean=list(mean),
        image_std=list(std),
    )
    return wrapper._get_gpu_norm_tensors(device=device)


class CudaView(types.ModuleType):
    """``torch`` as an SGLang eager path sees it when we ask it to take its CUDA branch on another device."""

    def __init__(self) -> None:
        super().__init__("torch")
        self.cuda = types.SimpleNamespace(is_available=lambda: True)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


# -- the processor (tokenizer side) ----------------------------------------------------------------------------------


def make_processor(source: Source, config: PreprocessConfig, transport: str = "cpu") -> Any:
    """A real ``KimiK3ImageProcessor`` built as SGLang's tests build it: ``object.__new__`` + the attributes read.

    The wrapper (``KimiK3GPUProcessorWrapper``) and its ``KimiK3PreprocessConfig`` are constructed by their
    own ``__init__`` / ``from_media_processor`` from a checkpoint-style ``media_proc_cfg``; only the HF
    processor is a namespace holding that config and the stub tokenizer.
    """
    pk3 = source.module("multimodal.processors.kimi_k3")
    tokenizer = StubTokenizer()
    media = types.SimpleNamespace(media_proc_cfg=media_proc_cfg(config))
    hf = types.SimpleNamespace(tokenizer=tokenizer, image_processor=None, media_processor=media)
    art = sys.modules.get("sglang.srt.multimodal.media_artifacts.kimi_k3")
    if art is not None and hasattr(art, "KimiK3PreprocessConfig"):
        pconf = art.KimiK3PreprocessConfig.from_media_processor(media)
        wrapper = pk3.KimiK3GPUProcessorWrapper(
            hf, image_token=IMAGE_TOKEN, image_token_id=IMAGE_TOKEN_ID, config=pconf
        )
    else:  # an older wrapper signature: keyword geometry (semantics §4.2, the PR-era test fixture)
        c = media.media_proc_cfg
        wrapper = pk3.KimiK3GPUProcessorWrapper(
            hf,
            image_token=IMAGE_TOKEN,
            image_token_id=IMAGE_TOKEN_ID,
            patch_size=c["patch_size"],
            merge_kernel_size=c["merge_kernel_size"],
            in_patch_limit=c["in_patch_limit"],
            patch_limit_on_one_side=c["patch_limit_on_one_side"],
            fixed_output_tokens=c["fixed_output_tokens"],
            image_mean=c["image_mean"],
            image_std=c["image_std"],
            transparent_bg_config=c["transparent_bg_config"],
        )
    bp = source.module("multimodal.processors.base_processor")
    proc = object.__new__(pk3.KimiK3ImageProcessor)
    proc._processor = wrapper
    proc._tokenizer = tokenizer
    proc.mm_feature_transport = transport
    proc.use_cuda_ipc = transport == "cuda_ipc"
    proc.mm_tokens = bp.MultimodalSpecialTokens(image_token=IMAGE_TOKEN, image_token_id=IMAGE_TOKEN_ID)
    # Item identities (hash / pad values) are keyed by a processor fingerprint SGLang builds from the
    # server's published config; a fixed string per media config stands in (it changes no pixel).
    digest = hashlib.sha256(json.dumps(media.media_proc_cfg, sort_keys=True).encode()).hexdigest()[:16]
    proc.processor_fingerprint = f"deferlab-{digest}"
    return proc


@contextlib.contextmanager
def gate_cuda(source: Source, cuda_available: bool) -> Iterator[None]:
    """The gate's ``is_cuda()`` answers ``cuda_available`` (patched only when the machine says otherwise)."""
    pk3 = source.module("multimodal.processors.kimi_k3")
    real = pk3.__dict__.get("is_cuda")
    if real is not None and bool(real()) == bool(cuda_available):
        yield
        return
    why = f"is_cuda -> {cuda_available} for the gate (this machine says {not cuda_available}); SGLang's gate tests do the same"
    with patched(source, pk3, "is_cuda", lambda: cuda_available, why):
        yield


def eager_image_features(source: Source, wrapper: Any, images: Sequence[Any], device: str) -> Any:
    """The wrapper's real ``prepare_image_features`` (the eager artifact path) on ``device``.

    On CUDA it runs as shipped. Elsewhere its own code runs with ``torch.cuda.is_available()`` answering
    True and the stager ``_k3_to_cuda_chw`` staging to ``device`` (the shipped one hard-codes ``.cuda()``):
    the stager's own code, with ``.cuda()`` resolving to ``device`` (`eager_stager`), as the eager
    producer's ``_gpu_call`` gets it.
    """
    fn = type(wrapper).prepare_image_features.__get__(wrapper)  # the class's, even if the instance shadows it
    if str(device).startswith("cuda"):
        return fn(list(images))
    source.patch(
        "sglang.srt.multimodal.processors.kimi_k3.KimiK3GPUProcessorWrapper.prepare_image_features",
        f"eager path on {device}: own code run with torch.cuda.is_available() -> True, _k3_to_cuda_chw "
        f"staging to {device} instead of .cuda(), and the wrapper's own _get_gpu_norm_tensors(device={device!r}) "
        "called first (it caches; its default device is 'cuda')",
    )
    wrapper._get_gpu_norm_tensors(device=device)
    return run_with_globals(fn, torch=CudaView(), _k3_to_cuda_chw=eager_stager(source, device))(list(images))


# -- the model (scheduler side) --------------------------------------------------------------------------------------


class TowerStub:
    """The vision tower attributes ``get_image_feature`` reads (device, patch size, weight dtype), as SGLang's tests stub it."""

    def __init__(self, device: str | torch.device, patch_size: int, dtype: torch.dtype = torch.bfloat16) -> None:
        self.device = torch.device(device)
        self.patch_size = patch_size
        self.patch_embed = types.SimpleNamespace(proj=types.SimpleNamespace(weight=torch.empty(0, dtype=dtype)))
        self.merge_kernel_size = (2, 2)


def make_model(source: Source, device: str | torch.device, patch_size: int) -> Any:
    """A real ``KimiK3ForConditionalGeneration`` without weights: ``object.__new__`` + ``nn.Module.__init__``."""
    mk3 = source.module("models.kimi_k3")
    model = object.__new__(mk3.KimiK3ForConditionalGeneration)
    torch.nn.Module.__init__(model)
    model.vision_tower = TowerStub(device, patch_size)
    model.use_data_parallel = True
    model.mm_projector = lambda embeds: embeds
    model._encoder_image_processor = None
    return model


def capture_loader(
    source: Source, items: Sequence[Any], device: str | torch.device, patch_size: int, parallel: Any = None
) -> Callable:
    """The ``load_local_pixel_values`` closure the real ``get_image_feature`` hands the DP runner.

    Captured as SGLang's tests capture it: the runner ``run_dp_sharded_mrope_vision_model`` is replaced
    for the call by a recorder (the model imports it lazily from ``multimodal.mm_utils``), so the model's
    own preamble (grid checks) and its own loader run unchanged. Versions whose loader reads the TP size
    for the IPC count (0.5.18-0.5.21) get it from ``parallel`` at each call, by default the
    ``tp_size=1, attn_tp_size=1`` namespace SGLang's consumer tests patch in.
    """
    mmu = source.module("multimodal.mm_utils")
    model = make_model(source, device, patch_size)
    seen: dict[str, Any] = {}

    def recorder(vision_model: Any, pixel_values: Any, grid_thw_list: Any, **kwargs: Any) -> Any:
        seen.update(kwargs, grid_thw_list=grid_thw_list)
        return None

    why = "replaced by a recorder that keeps the loader get_image_feature passes (SGLang's own consumer tests do this)"
    with patched(source, mmu, "run_dp_sharded_mrope_vision_model", recorder, why):
        model.get_image_feature(list(items))
    loader = seen.get("load_local_pixel_values")
    if loader is None:
        raise RuntimeError("get_image_feature did not pass a load_local_pixel_values loader to the DP runner")
    mk3 = source.module("models.kimi_k3")
    # by default one rank, no DP attention: what SGLang's consumer tests give get_parallel
    state = parallel if parallel is not None else topology.parallel(1)
    names = [n for n in ("get_parallel", "configured_tp_size") if n in mk3.__dict__]
    why = "parallel state the loader reads for its IPC count (SGLang's tests patch it to tp_size=1)"
    # 0.5.17's loader reads server_args.tp_size for its IPC count; no server published any here
    server = "get_server_args" in getattr(loader, "__code__", types.SimpleNamespace(co_names=())).co_names
    server_why = (
        "no server published ServerArgs here; the loader reads only its .tp_size (for its IPC count): "
        "the parallel state's"
    )

    def load(indices: Sequence[int]) -> Any:
        with contextlib.ExitStack() as stack:
            stack.enter_context(answer_topology(source, mk3, names, state, why))
            if server:
                stack.enter_context(answer_topology(source, mk3, ["get_server_args"], state, server_why))
            return loader(list(indices))

    return load


def tiny_item(sb: types.ModuleType) -> Any:
    """A one-image ``MultimodalDataItem`` of ``sb`` (schedule_batch): a 3x14x14 uint8 feature, grid (1, 1, 1)."""
    return sb.MultimodalDataItem(
        modality=sb.Modality.IMAGE,
        feature=torch.zeros(3, 14, 14, dtype=torch.uint8),
        model_specific_data={"image_grid_thw": torch.tensor([[1, 1, 1]], dtype=torch.int64)},
    )
