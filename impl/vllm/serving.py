"""What a user's vLLM serving settings make of a family's image path, decided by the release's own code.

Why one module: every vLLM family path (Kimi-K3's, Qwen's, the normalization-only families') asks the same
three questions of the loaded release, and each is answered by running the release's code, never by restating
it:

* **Does the device normalize?** ``mm_device_do_normalize`` (``--mm-device-do-normalize``; ``None`` = the CLI's
  default) is resolved by the release's ``ModelConfig._resolve_mm_device_do_normalize`` against the model
  class's ``supports_mm_device_do_normalize``, read off the class in the release's source (`ModelClass`; the
  model modules themselves import the serving stack). A release without the method has no such option (off).
* **What does the processor get?** The release's ``MultiModalConfig.merge_mm_processor_kwargs``: with the
  device normalizing, ``do_rescale`` and ``do_normalize`` are forced off (uint8 reaches the device).
* **What does the device do?** The release's ``build_mm_input_norm`` (``FusedMMInputNorm`` with the parameters
  its ``_load_norm_params`` reads from the checkpoint's config, or ``IdentityInputNorm``), built with the layout
  the model class passes, and applied with ``forward_native``: the CPU path (CUDA runs the release's Triton
  kernel instead: ``scripts/gpu_norm_check.py`` compares the two).

What stands in for a serving deployment, each named in the paths' provenance: the checkpoint folder is a
temporary folder holding the config as ``preprocessor_config.json`` (and empty ``processor_config.json`` /
``tokenizer_config.json``, which the release's lookup skips as it skips absent ones, without asking the
Hugging Face cache); the ``ModelConfig`` is a namespace carrying ``model``, ``revision``, ``hf_config``,
``hf_image_processor_config`` (the config dict, what transformers reads from that file) and the release's own
``MultiModalConfig``; the current ``VllmConfig`` a custom op's constructor asks for is a namespace holding the
release's default ``CompilationConfig`` (it only picks the dispatch, which is not used: ``forward_native`` is
called directly).
"""

from __future__ import annotations

import ast
import inspect
import json
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.impl.loader import owned
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputTypeError, InputValueError

PARSE = "vllm.multimodal.parse"
NORM = "vllm.model_executor.layers.fusion.mm_input_norm"
MODEL_CONFIG = "vllm.config.model"
MULTIMODAL_CONFIG = "vllm.config.multimodal"
VLLM_CONFIG = "vllm.config.vllm"
COMPILATION_CONFIG = "vllm.config.compilation"
DTYPES = ("bfloat16", "float32")
LABEL = "VLLM"  # the release's default serving setting
HOST_LABEL = "VLLM host-normalized"  # the host row beside a device default (or a user's device_normalize=False)
DEVICE_LABEL = "VLLM device-normalized"  # a user's device_normalize=True where the default is the host
LAYOUTS = ("pcl", "bchw")


@dataclass(frozen=True)
class Settings:
    """The serving settings a user passes: ``device_normalize`` (``--mm-device-do-normalize``; None = the
    release's default for the model), ``processor_kwargs`` (``--mm-processor-kwargs``: ``min_pixels``,
    ``max_pixels``, ...) and ``dtype`` (the vision tower's: what the device normalization casts to)."""

    device_normalize: bool | None = None
    processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        if self.device_normalize not in (None, True, False):
            raise InputTypeError(
                f"device_normalize must be None, True or False, got {self.device_normalize!r} "
                f"({type(self.device_normalize).__name__})"
            )
        if not isinstance(self.processor_kwargs, Mapping) or not all(isinstance(k, str) for k in self.processor_kwargs):
            raise InputTypeError(
                f"processor_kwargs must be a mapping of names to values, got {self.processor_kwargs!r}"
            )
        if self.dtype not in DTYPES:
            raise InputValueError(f"dtype {self.dtype!r} is not accepted; accepted: {', '.join(DTYPES)}")
        object.__setattr__(self, "processor_kwargs", dict(self.processor_kwargs))

    def replace(self, **changes: Any) -> Settings:
        return Settings(**{**self.__dict__, **changes})


@dataclass(frozen=True)
class ModelClass:
    """The model class vLLM serves a family with: its registry architecture and where its source is."""

    architecture: str
    file: str  # relative to the release folder

    def node(self, root: Path) -> ast.ClassDef | None:
        """The class's definition in the release (None: the release does not have it)."""
        tree = _parsed(str(root / self.file))
        return None if tree is None else _class(tree, self.architecture)

    def supports_device_normalize(self, root: Path) -> bool | None:
        """The class's ``supports_mm_device_do_normalize`` as its source sets it (a base class of the same module
        followed; ``False``, the interface's default, when none sets it); None when the class is absent."""
        tree = _parsed(str(root / self.file))
        node = None if tree is None else _class(tree, self.architecture)
        if tree is None or node is None:
            return None
        seen: set[str] = set()
        while node is not None and node.name not in seen:
            seen.add(node.name)
            value = _assigned(node, "supports_mm_device_do_normalize")
            if value is not None:
                return value
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            node = next((n for b in bases if (n := _class(tree, b)) is not None), None)
        return False

    def norm_layout(self, root: Path) -> str:
        """The layout the class builds its input norm with (``build_mm_input_norm(..., layout=...)``; "pcl" when
        it passes none, the function's default)."""
        node = self.node(root)
        for call in ast.walk(node) if node is not None else ():
            name = getattr(getattr(call, "func", None), "id", None) or getattr(getattr(call, "func", None), "attr", "")
            if isinstance(call, ast.Call) and name == "build_mm_input_norm":
                for kw in call.keywords:
                    if kw.arg == "layout" and isinstance(kw.value, ast.Constant):
                        return str(kw.value.value)
        return "pcl"


@lru_cache(maxsize=32)
def _parsed(path: str) -> ast.Module | None:
    """A release file's AST (a release folder never changes under a load; None when absent or unparsable)."""
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _assigned(node: ast.ClassDef, attr: str) -> bool | None:
    for stmt in node.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        value = getattr(stmt, "value", None)
        if any(getattr(t, "id", None) == attr for t in targets) and isinstance(value, ast.Constant):
            return bool(value.value)
    return None


def parse(source: Source, images: Sequence[Any]) -> list[Any]:
    """vLLM's input parser on a request's images (``MultiModalDataParser._parse_image_data``: EXIF orientation,
    then ``convert_image_mode(..., "RGB")``, transparency composited onto white): what the processor is handed."""
    parser = source.module(PARSE).MultiModalDataParser()
    items = parser._parse_image_data(list(images))
    return [items.get(i) for i in range(len(images))]


# --- mm_device_do_normalize ------------------------------------------------------------------------------------------
def has_device_normalize(source: Source) -> bool:
    """Whether the release has the ``mm_device_do_normalize`` option at all (0.31.0 and later)."""
    model = source.module(MODEL_CONFIG).ModelConfig
    return hasattr(model, "_resolve_mm_device_do_normalize")


def resolve_device_normalize(source: Source, model: ModelClass, setting: bool | None) -> bool:
    """What the release makes of ``setting`` for ``model``: its ``ModelConfig._resolve_mm_device_do_normalize``
    run on the class's ``supports_mm_device_do_normalize`` (False where the release has no such option)."""
    if not has_device_normalize(source):
        return False
    supports = bool(model.supports_device_normalize(Path(source.root)))
    holder = types.SimpleNamespace(_model_info=types.SimpleNamespace(supports_mm_device_do_normalize=supports))
    return bool(source.module(MODEL_CONFIG).ModelConfig._resolve_mm_device_do_normalize(holder, setting))


def multimodal_config(source: Source, settings: Settings, device_normalize: bool) -> Any:
    """The release's ``MultiModalConfig`` for these settings (``mm_device_do_normalize`` only where it has it)."""
    cls = source.module(MULTIMODAL_CONFIG).MultiModalConfig
    kwargs: dict[str, Any] = {"mm_processor_kwargs": dict(settings.processor_kwargs) or None}
    if has_device_normalize(source):
        kwargs["mm_device_do_normalize"] = device_normalize
    return cls(**kwargs)


def merged_kwargs(source: Source, settings: Settings, device_normalize: bool, request: Mapping[str, Any]) -> dict:
    """The processor kwargs the release hands its processor for a request: its ``merge_mm_processor_kwargs``
    (configured then request kwargs; ``do_rescale``/``do_normalize`` forced off when the device normalizes)."""
    return dict(multimodal_config(source, settings, device_normalize).merge_mm_processor_kwargs(dict(request)))


def roles(device: bool, default: bool, dtype: str, host_path: str) -> tuple[str, str, str]:
    """(path, label, dtype) of a path that normalizes on the device or not, beside the release's ``default``:
    ``device-normalized`` or ``host_path``; ``VLLM`` for the default, else what it is; the tower's dtype on the
    device, the processor's float32 on the host."""
    label = LABEL if device == default else DEVICE_LABEL if device else HOST_LABEL
    return ("device-normalized" if device else host_path), label, (dtype if device else "float32")


# --- the checkpoint folder and the model config -----------------------------------------------------------------------
def config_folder(cfg: Mapping[str, Any]) -> str:
    """A folder holding ``cfg`` as ``preprocessor_config.json`` (one per distinct config, removed at exit)."""
    body = json.dumps(cfg, default=list)
    files = {"preprocessor_config.json": body, "processor_config.json": "{}", "tokenizer_config.json": "{}"}
    return owned.written("deferlab-vllm-config-", json.dumps(cfg, sort_keys=True, default=list), files)


def model_config(cfg: Mapping[str, Any], mm_config: Any = None, hf_config: Any = None) -> types.SimpleNamespace:
    """The ``ModelConfig`` stand-in the release's functions read (see the module docstring)."""
    return types.SimpleNamespace(
        model=config_folder(cfg),
        revision=None,
        hf_config=hf_config,
        hf_image_processor_config=dict(cfg),
        multimodal_config=mm_config,
        get_multimodal_config=lambda: mm_config,
        dtype=None,
    )


# --- the device normalization -----------------------------------------------------------------------------------------
def input_norm(source: Source, cfg: Mapping[str, Any], layout: str = "pcl") -> Any:
    """The release's ``build_mm_input_norm`` for a model whose checkpoint config is ``cfg``, device
    normalization on (``FusedMMInputNorm``, or ``IdentityInputNorm`` where the config's rescale and normalize
    are the identity)."""
    if layout not in LAYOUTS:
        raise InputValueError(f"layout {layout!r} is not accepted; accepted: {', '.join(LAYOUTS)}")
    norm = source.module(NORM)
    holder = types.SimpleNamespace(mm_device_do_normalize=True)
    mc = model_config(cfg, mm_config=holder)
    kwargs = {"layout": layout} if "layout" in inspect.signature(norm.build_mm_input_norm).parameters else {}
    if layout != "pcl" and not kwargs:
        raise InputValueError(f"{source.name}'s build_mm_input_norm has no layout argument ({layout!r} asked)")
    compilation = source.module(COMPILATION_CONFIG).CompilationConfig()
    with source.module(VLLM_CONFIG).set_current_vllm_config(types.SimpleNamespace(compilation_config=compilation)):
        return norm.build_mm_input_norm(mc, **kwargs)


def apply(norm: Any, values: Any, dtype: str) -> np.ndarray:
    """``norm`` on ``values`` (uint8, the layout it was built with) into ``dtype``, as float32 NumPy: its
    ``forward_native`` (a ``FusedMMInputNorm``), or its ``forward`` (``IdentityInputNorm``: a cast)."""
    import torch

    x = values if isinstance(values, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(values))
    run = getattr(norm, "forward_native", None) if hasattr(norm, "weight") else None
    out = (run or norm.forward)(x, getattr(torch, dtype))
    return out.float().numpy()


def norm_levels(norm: Any, channels: int, layout: str, dtype: str) -> np.ndarray:
    """(channels, 256) float32: what ``norm`` gives each uint8 level of each channel (one patch of 256 levels per
    channel in ``pcl``; one 16x16 image per channel in ``bchw``)."""
    levels = np.arange(256, dtype=np.uint8)
    if layout == "bchw":
        x = np.broadcast_to(levels.reshape(1, 1, 16, 16), (1, channels, 16, 16))
    else:
        x = np.tile(levels, channels).reshape(1, channels * 256)
    return apply(norm, np.ascontiguousarray(x), dtype).reshape(channels, 256)


def norm_name(norm: Any) -> str:
    """What ran, as provenance names it."""
    cls = type(norm)
    step = "forward_native" if hasattr(norm, "weight") else "forward"
    return f"{cls.__module__}.{cls.__qualname__}.{step}"


def norms_named(norms: Any) -> str:
    """The norms built so far, as provenance names them (before any: what ``build_mm_input_norm`` may return)."""
    names = sorted({norm_name(n) for n in norms})
    return (
        " / ".join(names)
        or f"{NORM}.FusedMMInputNorm.forward_native ({NORM}.IdentityInputNorm.forward where "
        "the config's rescale and normalize are the identity)"
    )


def steps(model: ModelClass, settings: Settings, device: bool, layout: str, norms: Any, dtype: str) -> dict:
    """The provenance steps every vLLM path shares: how ``mm_device_do_normalize`` was resolved, and (device
    path) which norm ran."""
    found = {
        "device_normalize": f"real: {MODEL_CONFIG}.ModelConfig._resolve_mm_device_do_normalize("
        f"{settings.device_normalize}) -> {device} ({model.architecture} as {model.file} declares "
        "supports_mm_device_do_normalize)",
    }
    if device:
        found["normalize"] = (
            f"real: {NORM}.build_mm_input_norm(layout {layout!r}) -> _load_norm_params from the checkpoint's config, "
            f"then {norms_named(norms)} into {dtype} (the CPU path; CUDA runs fused_mm_input_norm_triton); model "
            "config, checkpoint folder and vLLM config stood in for as impl.vllm.serving states"
        )
    return found
