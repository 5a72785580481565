"""What every SGLang family path shares: loading its processor module on demand, building SGLang's processor
without a server, handing it decoded images, the CPU switch, and reading per-level values off a served canvas.

Why shared: each family path runs one SGLang processor module that the Kimi-K3 load does not import (so
that load stays as it was); the module is imported only when a family path is asked for, and a release
without it is refused in one line before anything runs. The processors are built the way `runtime` builds
Kimi-K3's: the class's own ``__init__`` runs, only the base class's (thread pools, caches, the serving
runtime context) is answered by a namespace that sets the attributes it would set first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from deferlab.impl.loader.importer import RequiredImportError
from deferlab.impl.sglang.runtime import run_with_globals
from deferlab.impl.sglang.sources import SGLangSourceError, Source
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.seam import SGLANG_LABEL
from deferlab.reference.system.validate import type_name

LEVELS = 256
_CPU_SWITCH = "SGLANG_USE_CPU_ENGINE"
_QUIET = ("sglang.srt.utils.common", "sglang.srt.multimodal.processors.internvl")
ConfigT = TypeVar("ConfigT")


def typed_config(cfg: Any, cls: type[ConfigT], read: Callable[[Mapping[str, Any]], ConfigT], file: str) -> ConfigT:
    """``cfg`` as a family's typed config ``cls``: a published ``file`` dict read by ``read`` (its reader checks
    it), an instance as it is, anything else an `InputTypeError` naming both."""
    if isinstance(cfg, Mapping):
        return read(cfg)
    if not isinstance(cfg, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise InputTypeError(f"cfg must be {article} {cls.__name__} or a {file} dict, got {type_name(cfg)}")
    return cfg


def source_of(source: Any) -> Source:
    """The loaded `Source` of ``source`` (a `Source`, or anything holding one as ``.source``: `SGLangImpl`)."""
    return getattr(source, "source", source)


def require(source: Source, module: str, display: str) -> types.ModuleType:
    """SGLang's ``module`` imported for real from ``source``; a tree without its file is refused in one line
    (read off the tree, nothing imported), and so is a module whose import fails inside SGLang."""
    rel = module.replace(".", "/") + ".py"
    if not (Path(source.root) / rel).is_file():
        raise SGLangSourceError(
            f"sglang source {source.spec!r} (version {source.version}) has no {display} processor ({rel} is absent); "
            f"accepted: a release or checkout that ships {rel} (0.5.17 and later do)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SGLang warns about CUDA-only features at import; they are not ours
            return source.importer.import_required(module)
    except RequiredImportError as e:
        raise SGLangSourceError(
            f"sglang source {source.spec!r} (version {source.version}): importing {e.module} failed inside SGLang: "
            f"{type(e.cause).__name__}: {e.cause}"
        ) from e


def construct(source: Source, cls: type, hf_config: Any, server_args: Any, processor: Any, **globals_: Any) -> Any:
    """An instance of SGLang's processor ``cls`` built by its own ``__init__``.

    Its ``super().__init__`` (``BaseMultimodalProcessor``: executors, the preprocess cache, the serving
    runtime context) is answered by a namespace that sets the three attributes the base class sets first
    (``hf_config``, ``_processor``, ``server_args``); ``globals_`` are further names of ``__init__``'s module
    resolving differently (`run_with_globals`), e.g. ``get_model`` where no server published a model config.
    """
    proc = object.__new__(cls)

    def base_init(hf_config: Any, server_args: Any, _processor: Any, *_: Any, **__: Any) -> None:
        proc.hf_config, proc.server_args, proc._processor = hf_config, server_args, _processor

    base = types.SimpleNamespace(__init__=base_init)
    init = run_with_globals(cls.__init__, super=lambda *_: base, **globals_)
    init(proc, hf_config, server_args, processor)
    names = ", ".join(["super"] + sorted(globals_))
    source.patch(
        f"{cls.__module__}.{cls.__qualname__}.__init__",
        f"own __init__ run as shipped with {names} answered by deferlab: the base class's __init__ (the "
        "serving stack) only sets hf_config, _processor and server_args here",
    )
    return proc


def hand_over(source: Source, proc: Any) -> None:
    """The processor's image loading (URLs, bytes, executors) replaced by SGLang's own per-item loader.

    Each image the request carries goes through the class's ``_load_single_item`` (PIL in: SGLang's own
    RGB rule, ``discard_alpha_channel`` as the caller passes it); only the async plumbing around it is not
    SGLang's. The base output is SGLang's own dataclass.
    """
    bp = source.module("multimodal.processors.base_processor")
    sb = source.module("managers.schedule_batch")
    cls = type(proc)

    async def load(*_: Any, **kwargs: Any) -> Any:
        discard = kwargs.get("discard_alpha_channel", True)
        images = [
            cls._load_single_item(image, sb.Modality.IMAGE, discard_alpha_channel=discard)
            for image in kwargs.get("image_data") or ()
        ]
        ids = kwargs.get("input_ids") or kwargs.get("prompt")
        return bp.BaseMultiModalProcessorOutput(input_text=kwargs.get("prompt"), input_ids=ids, images=images)

    proc.load_mm_data = proc.fast_load_mm_data = load
    source.patch(
        f"{bp.__name__}.BaseMultimodalProcessor.load_mm_data",
        f"image loading: each image through {cls.__name__}._load_single_item (its own), the executors skipped",
    )


@contextlib.contextmanager
def cpu_engine(source: Source) -> Iterator[None]:
    """SGLang's own CPU switch for the block: ``SGLANG_USE_CPU_ENGINE=1``, so ``get_device()`` answers
    ``"cpu"``. ``is_cpu`` caches its answer (read at import, before the switch), so its cache is cleared on
    entry and on exit; the warning ``get_device`` logs on every call ("low performance expected") is kept
    quiet. Values bound at import (``_is_cpu = is_cpu()``) are untouched."""
    is_cpu = source.module("utils.common").is_cpu
    old = os.environ.get(_CPU_SWITCH)
    loggers = [logging.getLogger(name) for name in _QUIET]
    levels = [lg.level for lg in loggers]
    os.environ[_CPU_SWITCH] = "1"
    is_cpu.cache_clear()
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(_CPU_SWITCH, None)
        else:
            os.environ[_CPU_SWITCH] = old
        is_cpu.cache_clear()
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def widen(values: torch.Tensor) -> np.ndarray:
    """float32 NumPy of a (BF16 or FP32) tensor: exact, a BF16 value widens without rounding."""
    return values.detach().to("cpu", torch.float32).numpy()


def level_image(height: int, width: int) -> np.ndarray:
    """(H, W, 3) uint8 in which every channel holds every level (each channel a different ramp)."""
    if height * width < LEVELS:
        raise ValueError(f"a level image needs at least {LEVELS} pixels, got {width}x{height}")
    ramp = np.arange(height * width, dtype=np.int64).reshape(height, width)
    return np.stack([(ramp * k + 85 * c) % LEVELS for c, k in enumerate((1, 7, 13))], axis=-1).astype(np.uint8)


def unfold_grid(values: np.ndarray, rows: int, cols: int, side: int) -> np.ndarray:
    """(C, rows*side, cols*side): ``rows*cols`` leading (C, side*side) blocks put back where they came from
    (row-major, as InternVL crops its tiles and Kimi orders its patches)."""
    blocks = values[: rows * cols].reshape(rows, cols, -1, side, side)
    return blocks.transpose(2, 0, 3, 1, 4).reshape(-1, rows * side, cols * side)


def canvas_levels(canvas: np.ndarray, image: np.ndarray, where: str) -> np.ndarray:
    """(C, 256) float32: the value a path gave each level of each channel, read off ``canvas`` (C, H, W), the
    served values of ``image`` (H, W, C) at unchanged size. A level that came out as two values is an error
    naming ``where`` (the path did more than a per-level map: the read is invalid)."""
    out = np.empty((canvas.shape[0], LEVELS), dtype=np.float32)
    for c in range(canvas.shape[0]):
        order = np.argsort(image[..., c], axis=None, kind="stable")
        levels, values = image[..., c].ravel()[order], canvas[c].ravel()[order]
        starts = np.searchsorted(levels, np.arange(LEVELS))
        out[c] = values[starts]
        if not np.array_equal(out[c][levels], values) or len(np.unique(levels)) != LEVELS:
            raise RuntimeError(f"{where}: the served canvas is not a per-level map of channel {c} (levels unreadable)")
    return out


class FamilyPathBase:
    """The attributes every SGLang family path has (`reference.system.served.FamilyPath`)."""

    label = SGLANG_LABEL
    path = "served"
    real_code = True
    family = ""
    dtype = "bfloat16"

    def __init__(self, source: Source, module: types.ModuleType) -> None:
        self.source = source
        self.module = module
        self.system = source.name
        self._cache: dict[Any, Any] = {}

    @property
    def name(self) -> str:
        """``sglang-0.5.23 (internvl, served)``: how the claims name the path in a failure."""
        return f"{self.system} ({self.family}, {self.path})"

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` once per ``key`` (a processor per config: its ``__init__`` runs once)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        """(values, grid) of `run` (the prompt's tokens dropped)."""
        values, grid, _ = self.run(images, cfg)
        return values, grid

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(values float32 (N, C, L), grid int64 (n, 3), image tokens each image got in the prompt)."""
        raise NotImplementedError


class NormOnlyPath(FamilyPathBase):
    """A normalization-only family's path (semantics §18.9): judged on what it gives each level (`levels`), with
    the dtype the model casts to; its geometry is not restated, so C13/C14 are ``n/a`` with ``not_restated``."""

    not_restated = "its geometry is not restated"
    # The geometry and pixel claims (C13, C14) this path answers beyond the family's scope, the others ``n/a`` with
    # ``not_restated`` (properties/claims/test_families.py): none here; a path with a geometry names C13.
    judged_claims: tuple[str, ...] = ()
    dtypes: Mapping[str, str] = {"bfloat16": "the tower's cast", "float32": "none"}

    def __init__(self, source: Source, module: types.ModuleType, dtype: str = "bfloat16") -> None:
        if dtype not in self.dtypes:
            accepted = " or ".join(f"{d!r} ({why})" for d, why in self.dtypes.items())
            raise InputValueError(f"dtype: {dtype!r}; accepted: {accepted}")
        super().__init__(source, module)
        self.dtype = dtype  # float32: the processor's own values, before the model casts them to the tower's dtype

    @property
    def not_judged(self) -> str:
        """Why the claims outside `judged_claims` are ``n/a`` on this path, in a few words."""
        return self.not_restated

    def geometry(self, width: int, height: int, cfg: Any) -> Any:
        raise InputValueError(f"n/a: {self.name}: normalization only ({self.not_restated})")

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        raise InputValueError(f"n/a: {self.name}: normalization only ({self.not_restated})")
