"""SGLang's own InternVL processor (``processors/internvl.py``) as a `FamilyPath`, run for real on the CPU.

Why its whole entry and not the tiling alone: SGLang's per-image steps live inside the request method
(``process_mm_data_async`` -> ``process_qwen_mm_data_async``): ``convert("RGB")``, the tensor made and
normalized first (fp32, on ``get_device()``), then ``dynamic_preprocess`` (ties go to the largest grid,
``F.interpolate(bicubic)`` without antialias, the thumbnail) and the cast to bfloat16, then the prompt's
``<img><IMG_CONTEXT>*n</img>`` expansion. Running the entry runs all of them as shipped; what is not
SGLang's here: the processor's base-class ``__init__`` (`common.construct`), the image loading's executors
(`common.hand_over`), the tokenizer (a stub with InternVL's special tokens), and ``get_device()`` answering
``"cpu"`` through SGLang's own ``SGLANG_USE_CPU_ENGINE=1`` (`common.cpu_engine`).

Geometry is pixel-free: SGLang's own ``dynamic_preprocess`` on a ``meta`` tensor of the image's shape, its
``F.interpolate`` answered by the output shape it is asked for (no data; torch's meta bicubic is a Python
decomposition, 0.3 s a call), called with the arguments the request method passed it in a probe request (read off
that call, not restated), its ``best_ratio`` read at return; tokens are the processor's own
``num_image_token`` (its ``__init__``: ``(image_size // patch_size)**2 * downsample_ratio**2``) per tile,
the expansion the request method writes (checked against a served prompt in the tests).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.producer import run_kept
from deferlab.impl.sglang.runtime import capture_locals, run_with_globals
from deferlab.impl.sglang.tokenizer import StubTokenizer
from deferlab.reference.system.family_configs import InternVLConfig
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_positive_int

MODULE = "sglang.srt.multimodal.processors.internvl"
# InternVL3-8B's language model (Qwen2.5-7B): the processor's default (OpenAI-placeholder) branch. InternVL2.5's
# InternLM2 takes the internlm2 branch, whose per-image steps are the same (max tiles fixed at 12).
LLM_ARCH = "Qwen2ForCausalLM"
PATCH_SIZE = 14  # InternViT's patch (vision_config.patch_size of the published checkpoints)
DOWNSAMPLE = 0.5  # the published config.json's downsample_ratio
_RATIO = ("best_ratio", "target_w", "target_h")


class _ShapeTorch(types.ModuleType):
    """``torch`` as the pixel-free geometry runs ``dynamic_preprocess``: ``nn.functional.interpolate`` answers
    with its output's shape only (it is called with ``size=``); everything else is the real torch."""

    def __init__(self) -> None:
        super().__init__("torch")
        shape = types.SimpleNamespace(interpolate=self._interpolate)
        self.nn = types.SimpleNamespace(functional=shape)

    @staticmethod
    def _interpolate(input: torch.Tensor, size: tuple[int, int], **_: Any) -> torch.Tensor:
        return torch.empty(*input.shape[:2], *size, device="meta", dtype=input.dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class _Tokenizer(StubTokenizer):
    """The stub tokenizer with InternVL's special tokens (``tokenizer(text, return_tensors="pt")["input_ids"]``)."""

    special = {"<IMG_CONTEXT>": 21, "<img>": 22, "</img>": 23, "<image>": 24, "<video>": 25, "<|video_pad|>": 26}

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.special[token]

    def __call__(self, text: Any, **_: Any) -> Any:
        return {"input_ids": torch.tensor([self.encode(text)])}


def config(cfg: Any) -> InternVLConfig:
    """``cfg`` as an `InternVLConfig` (a published ``config.json`` dict is read by its reader)."""
    return common.typed_config(cfg, InternVLConfig, InternVLConfig.from_preprocessor_config, "config.json")


def hf_config(cfg: InternVLConfig, llm_arch: str = LLM_ARCH) -> types.SimpleNamespace:
    """The checkpoint's ``config.json`` as SGLang reads it (the keys it does not read kept, as it gets them)."""
    return types.SimpleNamespace(
        force_image_size=cfg.image_size,
        vision_config=types.SimpleNamespace(image_size=cfg.image_size, patch_size=PATCH_SIZE),
        downsample_ratio=DOWNSAMPLE,
        llm_config=types.SimpleNamespace(architectures=[llm_arch]),
        min_dynamic_patch=cfg.min_num,
        max_dynamic_patch=cfg.max_num,
        use_thumbnail=cfg.use_thumbnail,
        dynamic_image_size=cfg.dynamic_image_size,
    )


class InternVLPath(common.FamilyPathBase):
    """SGLang's InternVL processor: tiles of 448, normalized before the resize, bfloat16 out."""

    family = "internvl"
    dtype = "bfloat16"

    def __init__(self, source: Any, module: types.ModuleType, llm_arch: str = LLM_ARCH) -> None:
        super().__init__(source, module)
        self.llm_arch = llm_arch
        self.cls = module.InternVLProcessor
        self._tiling = run_with_globals(self.cls.dynamic_preprocess, torch=_ShapeTorch())

    def processor(self, cfg: InternVLConfig) -> Any:
        """SGLang's ``InternVLProcessor`` for ``cfg``, built by its own ``__init__`` (`common.construct`)."""
        server_args = types.SimpleNamespace(max_context_len=None)
        no_model = types.SimpleNamespace(context_length=None)  # no server published a model config here
        return self.cached(("proc", cfg), lambda: self._build(cfg, server_args, no_model))

    def _build(self, cfg: InternVLConfig, server_args: Any, no_model: Any) -> Any:
        hf = types.SimpleNamespace(tokenizer=_Tokenizer())
        proc = common.construct(
            self.source, self.cls, hf_config(cfg, self.llm_arch), server_args, hf, get_model=lambda: no_model
        )
        common.hand_over(self.source, proc)
        return proc

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """SGLang's request entry on ``images`` (one ``<image>`` each): (tiles (N, 3, 448*448) bfloat16
        widened, (rows, cols, tiles) per image, the ``<IMG_CONTEXT>`` tokens each image got)."""
        cfg = config(cfg)
        proc = self.processor(cfg)
        calls: list[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]] = []
        real = self.cls.dynamic_preprocess

        def observed(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            out, seen = capture_locals(real, _RATIO, tensor, *args, **kwargs)
            calls.append((args, kwargs, seen))
            return out

        proc.dynamic_preprocess = observed  # on the instance: the class keeps its own
        with common.cpu_engine(self.source):
            output = run_kept(proc.process_mm_data_async(list(images), "", None))
        feats = [item.feature for item in output.mm_items]
        tokens = [int(end - start + 1) for item in output.mm_items for start, end in item.offsets]
        if not len(feats) == len(calls) == len(tokens) == len(images):
            raise RuntimeError(
                f"{self.system} InternVL: {len(images)} images gave {len(feats)} items, {len(calls)} tilings, "
                f"{len(tokens)} placeholder runs"
            )
        values = common.widen(torch.cat(feats)).reshape(-1, 3, feats[0].shape[-1] * feats[0].shape[-2])
        grid = [
            (seen["best_ratio"][1], seen["best_ratio"][0], len(f)) for (*_, seen), f in zip(calls, feats, strict=True)
        ]
        self._cache.setdefault(("call", cfg), calls[0][:2])
        return values, np.asarray(grid, dtype=np.int64).reshape(-1, 3), tokens

    def _call_arguments(self, cfg: InternVLConfig) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments after the image the request method passes ``dynamic_preprocess`` (read off a probe
        request's call: a 1x1 image)."""
        if ("call", cfg) not in self._cache:
            self.run([Image.new("RGB", (1, 1))], cfg)
        return self._cache[("call", cfg)]

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """SGLang's tiling of a ``width x height`` image, pixel-free (module docstring)."""
        cfg = config(cfg)
        width, height = check_positive_int("width", width), check_positive_int("height", height)
        args, kwargs = self._call_arguments(cfg)
        shape = torch.empty(3, height, width, device="meta")
        tiles, seen = capture_locals(self._tiling, _RATIO, shape, *args, **kwargs)
        cols, rows = seen["best_ratio"]
        n = int(tiles.shape[0])
        tokens = self.processor(cfg).num_image_token * n
        return Geometry(int(seen["target_w"]), int(seen["target_h"]), (rows, cols, n), tokens)

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what SGLang gives each level, read off a served image whose tiled canvas is its own size
        (the bicubic resize then maps each pixel to itself; `common.canvas_levels` checks that it did)."""
        cfg = config(cfg)
        probe = self.geometry(cfg.image_size, cfg.image_size, cfg)
        side = probe.width
        g = self.geometry(side, side, cfg)
        if (g.width, g.height) != (side, side):
            raise RuntimeError(
                f"{self.system} InternVL: no square image keeps its size ({side} -> {g.width}x{g.height})"
            )
        image = common.level_image(side, side)
        values, grid, _ = self.run([Image.fromarray(image)], cfg)
        rows, cols, _ = grid[0]
        tile = int(round(values.shape[-1] ** 0.5))
        return common.canvas_levels(common.unfold_grid(values, rows, cols, tile), image, f"{self.system} InternVL")

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.InternVLProcessor"
        return {
            "processor": f"{cls}.__init__ (own; its base class's __init__ answered by deferlab, get_model() -> no "
            "model config)",
            "load": f"{cls}._load_single_item per image (own); the executors and URL handling not run",
            "serve": f"{cls}.process_mm_data_async -> process_qwen_mm_data_async (own): convert('RGB'), "
            "from_numpy/255 and (x - mean) / std in fp32 on get_device(), dynamic_preprocess, bfloat16",
            "device": "get_device() -> 'cpu' through SGLang's own SGLANG_USE_CPU_ENGINE=1, set for the call (is_cpu's "
            "cache cleared on entry and exit)",
            "tiling": f"{cls}.dynamic_preprocess (own): ties to the largest grid, F.interpolate(bicubic) without "
            "antialias, thumbnail",
            "geometry": f"{cls}.dynamic_preprocess's own code on a meta tensor, F.interpolate answered by its "
            "output's shape (called with size=), with the arguments its caller passed in a probe request; "
            "best_ratio read at return",
            "num_tokens": f"{cls}.num_image_token (own __init__) per tile, as process_qwen_mm_data_async expands "
            "<IMG_CONTEXT>",
            "tokenizer": "modelled: a stub with InternVL's special tokens (one id per other character)",
            "levels": "a served image whose tiled canvas is its own size, read per level",
        }
