"""SGLang's Kimi-K2.5 processor (``processors/kimi_k25.py``) as a `FamilyPath`: its GPU branch's own torch on
the CPU (the family is Kimi-K2.5/K3, ``kimi-k3`` in the registry).

Why the GPU branch: ``KimiGPUProcessorWrapper.__call__`` takes it whenever CUDA is available (and
``SGLANG_FORCE_CPU_IMAGE_PREPROCESSING`` is off, its default): that is what a server serves. On a machine
without CUDA it falls back to the checkpoint's remote-code processor, which the wheel does not ship. The
branch is plain torch, so it runs here as shipped, with three things not SGLang's own:

* the CUDA dispatch is modelled: ``__call__`` runs with ``torch.cuda.is_available()`` answering True;
* ``.cuda()`` in ``_pil_to_cuda_chw`` / ``_ensure_chw_rgb`` moves to the CPU instead (`runtime.on_device`),
  and the wrapper's ``_get_gpu_norm_tensors(device="cpu")`` is called first (it caches; default ``cuda``);
* ``normalize_and_patchify`` takes its own torch fallback (``addcmul``) because the tensor is not on CUDA:
  on a GPU the Triton kernel (``value * scale + bias``) runs instead (whether the two agree bit for bit is a
  GPU check).

The wrapper is built by the processor's own ``__init__`` (``KimiK2_5VLImageProcessor``, from the checkpoint's
``media_proc_cfg``), images go through its own ``_load_single_item``, and the features are cast to the
tower's dtype (bfloat16) by the model's own ``materialize_multimodal_features``. Geometry and tokens are
``navit_resize_config`` (pure arithmetic) with the wrapper's own settings, the grid its
``_grid_thw_from_resize_config``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang import runtime, tokenizer
from deferlab.impl.sglang.families import common
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_positive_int

MODULE = "sglang.srt.multimodal.processors.kimi_k25"
TOWER_DTYPE = torch.bfloat16  # the vision tower is cast to the language model's dtype (the checkpoint's bfloat16)


def config(cfg: Any) -> PreprocessConfig:
    """``cfg`` as a `PreprocessConfig` (a checkpoint's ``media_proc_cfg`` dict is read by its reader)."""
    return common.typed_config(cfg, PreprocessConfig, PreprocessConfig.from_media_proc_cfg, "media_proc_cfg")


class KimiK25Path(common.FamilyPathBase):
    """SGLang's Kimi-K2.5 GPU branch: NaViT resize (bicubic, antialias, rounded), pad, normalize, patchify."""

    family = "kimi-k3"
    dtype = "bfloat16"

    def __init__(self, source: Any, module: types.ModuleType) -> None:
        super().__init__(source, module)
        self.cls = module.KimiK2_5VLImageProcessor

    def processor(self, cfg: PreprocessConfig) -> Any:
        """SGLang's ``KimiK2_5VLImageProcessor`` for ``cfg``, its wrapper made to take the GPU branch here."""
        return self.cached(("proc", cfg), lambda: self._build(cfg))

    def _build(self, cfg: PreprocessConfig) -> Any:
        media = types.SimpleNamespace(media_proc_cfg=tokenizer.media_proc_cfg(cfg))
        hf = types.SimpleNamespace(tokenizer=tokenizer.StubTokenizer(), image_processor=None, media_processor=media)
        hf_config = types.SimpleNamespace(media_placeholder_token_id=tokenizer.IMAGE_TOKEN_ID)
        proc = common.construct(self.source, self.cls, hf_config, types.SimpleNamespace(), hf)
        wrapper, mod = proc._processor, self.module
        wrapper._get_gpu_norm_tensors(device="cpu")
        to_chw = runtime.run_with_globals(
            mod._to_cuda_chw,
            _pil_to_cuda_chw=runtime.on_device(mod._pil_to_cuda_chw, "cpu"),
            _ensure_chw_rgb=runtime.on_device(mod._ensure_chw_rgb, "cpu"),
        )
        staged = functools.partial(mod._gpu_preprocess_images, to_chw=to_chw)
        cls = type(wrapper)
        wrapper._gpu_call = runtime.run_with_globals(cls._gpu_call.__get__(wrapper), _gpu_preprocess_images=staged)
        wrapper.__call__ = runtime.run_with_globals(cls.__call__.__get__(wrapper), torch=runtime.CudaView())
        self.source.patch(
            f"{MODULE}.KimiGPUProcessorWrapper.__call__",
            "modelled CUDA dispatch: own __call__ with torch.cuda.is_available() -> True; own _gpu_call with "
            "_gpu_preprocess_images given its own _to_cuda_chw, .cuda() resolving to the CPU; "
            "_get_gpu_norm_tensors(device='cpu') called first",
        )
        return proc

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The wrapper's GPU branch on ``images`` (one placeholder each), as the base class calls it:
        (patches (N, 3, p*p) bfloat16 widened, grid_thws, the image tokens each image got)."""
        proc = self.processor(config(cfg))
        sb = self.source.module("managers.schedule_batch")
        loaded = [self.cls._load_single_item(image, sb.Modality.IMAGE) for image in images]
        common_mod = self.source.module("multimodal.processors.kimi_common")
        if hasattr(common_mod, "unwrap_kimi_images"):  # 0.5.23: the loader wraps each image with its digest
            loaded = common_mod.unwrap_kimi_images(loaded)  # as the mixin's process_mm_data unwraps them
        ids = tokenizer.prompt_ids(len(loaded))
        out = proc._processor.__call__(text=[""], images=loaded, sglang_original_input_ids=ids)
        mmu = self.source.module("multimodal.mm_utils")
        pv = mmu.materialize_multimodal_features([out["pixel_values"]], device=torch.device("cpu"), dtype=TOWER_DTYPE)
        values = common.widen(pv)
        expanded = out["input_ids"].flatten().numpy() == tokenizer.IMAGE_TOKEN_ID
        edges = np.flatnonzero(np.diff(np.concatenate(([0], expanded.astype(np.int8), [0]))))
        tokens = [int(b - a) for a, b in zip(edges[::2], edges[1::2], strict=True)]
        return values.reshape(len(values), values.shape[1], -1), out["image_grid_thw"].numpy(), tokens

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """``navit_resize_config`` with the wrapper's own settings (the arguments ``_gpu_call`` passes)."""
        w = self.processor(config(cfg))._processor
        width, height = check_positive_int("width", width), check_positive_int("height", height)
        rc = self.module.navit_resize_config(
            width,
            height,
            w._patch_size,
            w._merge_kernel_size,
            w._in_patch_limit,
            w._patch_limit_on_one_side,
            w._fixed_output_tokens,
        )
        grid = tuple(int(g) for g in self.module._grid_thw_from_resize_config(rc, w._patch_size))
        pad = (int(rc["pad_width"]), int(rc["pad_height"]))
        return Geometry(int(rc["new_width"]), int(rc["new_height"]), grid, int(rc["num_tokens"]), pad)

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the branch gives each level, read off a served image it neither resizes nor pads
        (its resize is skipped at unchanged size; `common.canvas_levels` checks the map)."""
        cfg = config(cfg)
        side = 2 * cfg.factor
        while side * side < common.LEVELS:
            side += cfg.factor
        g = self.geometry(side, side, cfg)
        if (g.width, g.height, g.pad) != (side, side, (0, 0)):
            raise RuntimeError(f"{self.system} Kimi-K2.5: a {side}x{side} image is resized or padded ({g})")
        image = common.level_image(side, side)
        values, grid, _ = self.run([Image.fromarray(image)], cfg)
        _, rows, cols = (int(x) for x in grid[0])
        canvas = common.unfold_grid(values, rows, cols, cfg.patch_size)
        return common.canvas_levels(canvas, image, f"{self.system} Kimi-K2.5")

    def provenance(self) -> dict[str, str]:
        wrapper = f"{MODULE}.KimiGPUProcessorWrapper"
        return {
            "processor": f"{MODULE}.KimiK2_5VLImageProcessor.__init__ (own; builds the wrapper from media_proc_cfg; "
            "its base class's __init__ answered by deferlab)",
            "load": f"{MODULE}.KimiK2_5VLImageProcessor._load_single_item per image (own), then "
            "kimi_common.unwrap_kimi_images where the release has it (as its process_mm_data does)",
            "dispatch": f"modelled: {wrapper}.__call__ with torch.cuda.is_available() -> True (a CUDA server)",
            "serve": f"{wrapper}._gpu_call -> {MODULE}._gpu_preprocess_images (own torch, run on the CPU)",
            "stage": f"{MODULE}._to_cuda_chw / _pil_to_cuda_chw (own: convert('RGB'), from_numpy, permute), .cuda() "
            "resolving to the CPU",
            "resize": f"{MODULE}._resize_bicubic_if_needed (own: F.interpolate bicubic antialias, round, clamp)",
            "normalize": "sglang.kernels.ops.mm.process.image.normalize_and_patchify (own) with "
            f"{wrapper}._get_gpu_norm_tensors (own, on the CPU): its torch fallback (addcmul) runs here; on CUDA "
            "its Triton kernel would (modelled by the fallback)",
            "cast": "sglang.srt.multimodal.mm_utils.materialize_multimodal_features (own) to bfloat16, the tower's dtype",
            "geometry": f"{MODULE}.navit_resize_config and _grid_thw_from_resize_config (own) with the wrapper's settings",
            "num_tokens": f"{MODULE}.navit_resize_config (own); the prompt expanded by {MODULE}._expand_image_token_ids",
            "levels": "a served image the branch neither resizes nor pads, read per level",
        }
