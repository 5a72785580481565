"""SGLang's ERNIE-4.5-VL processor (``processors/ernie45_vl.py``) as a `FamilyPath` (semantics §18.9).

Why its own path: SGLang normalizes ERNIE-4.5-VL itself. Its ``Ernie4_5_VLImageProcessor.process_mm_data`` takes
the checkpoint's processor output (pixels as levels, its ``"images"``) and runs its own ``_pixel_values_norm``:
``(f32(rescale_factor) * x - mean) / std`` in float32 with the image processor's statistics, then the cast to the
model's dtype, inside the processor. Here the class's own ``__init__`` runs (the base class's answered as
`common.construct` does) with an image processor holding the config's statistics, and ``_pixel_values_norm`` runs
as shipped on every level in the ``(patches, C*p*p)`` layout it reads (C15).

Geometry (C13): ``process_mm_data_async`` runs ``resize_image`` on each decoded image, SGLang's own
``smart_resize`` with the module's constants (factor 28, 4 x 28 x 28 to 16384 x 28 x 28 pixels, a side ratio over
200 clamped), and hands the resized image to the checkpoint's processor, which resizes again from that size.
`geometry` runs SGLang's function as shipped, then the checkpoint processor's ``smart_resize`` as transformers
ships it (the release's pinned companion; the same function in every pin, 5.12.1-5.25.0, and the class defaults
deferlab's config holds; the checkpoints' remote-code processor is read, not run); `staged_geometry` names the
same two steps for C13's exhaustive sweep, both compiled.

Pixels (C14, `run`): each image through the class's own ``_load_single_item`` (``convert("RGB")``: alpha and keys
dropped), its own ``resize_image`` (Pillow's resize, ``resample`` as the module reads it), then the checkpoint's
processor modelled as for C13 by the release's transformers ``Ernie4_5_VLMoeImageProcessorPil`` with the config's
values and ``do_rescale`` / ``do_normalize`` off (its own resize again and patch layout: the levels the remote
code's ``"images"`` hold), then ``_pixel_values_norm`` as shipped, its cast included.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from deferlab.impl import compiled
from deferlab.impl.sglang.families import common
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import ErnieVLConfig, NormConfig
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_instance

MODULE = "sglang.srt.multimodal.processors.ernie45_vl"
PATCH = 14  # ERNIE-4.5-VL's vision patch size (its vision config): the layout _pixel_values_norm repeats over
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
PROCESSOR_MODULE = "transformers.models.ernie4_5_vl_moe.image_processing_ernie4_5_vl_moe"
PIL_MODULE = "transformers.models.ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe"
CALL = compiled.Call("f(h, w, a0, a1, a2)", ("r[1]", "r[0]"))  # smart_resize(h, w, factor, min, max) -> (w, h)


class Ernie45VLPath(common.NormOnlyPath):
    """SGLang's ERNIE-4.5-VL image path: its own loading, pre-resize and normalization around the processor's."""

    family = "ernie-4.5-vl"
    judged_claims = ("C13", "C14")  # its geometry (SGLang's pre-resize, then the processor's) and pixels are restated
    # float32: a model dtype of float32, so SGLang's own cast keeps its float32 values
    dtypes = {"bfloat16": "the model's dtype", "float32": "none"}

    def processor(self, cfg: NormConfig) -> Any:
        """``Ernie4_5_VLImageProcessor`` built by its own ``__init__`` for a model of this path's dtype, with an
        image processor holding ``cfg``'s mean, std and rescale factor (all ``_pixel_values_norm`` reads of it)."""

        def build() -> Any:
            vision = types.SimpleNamespace(patch_size=PATCH)
            ids = {"image_start_token_id": 1, "image_end_token_id": 2, "video_start_token_id": 3}
            hf_config = types.SimpleNamespace(
                model_type="ernie4_5_moe_vl", vision_config=vision, dtype=DTYPES[self.dtype], im_patch_id=5, **ids
            )
            hf_config.video_end_token_id = 4
            image_processor = types.SimpleNamespace(
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor
            )
            hf = types.SimpleNamespace(tokenizer=types.SimpleNamespace(), image_processor=image_processor)
            return common.construct(self.source, self.module.Ernie4_5_VLImageProcessor, hf_config, None, hf)

        return self.cached(("processor", NormConfig.checked(cfg)), build)

    def pre_resize(self) -> tuple[Any, tuple[int, int, int]]:
        """SGLang's own ``smart_resize`` and the (factor, min_pixels, max_pixels) ``resize_image`` passes it (the
        module's constants, read from the release)."""
        m = self.module
        return m.smart_resize, (int(m.IMAGE_FACTOR), int(m.MIN_PIXELS), int(m.MAX_PIXELS))

    def processor_resize(self, cfg: Any) -> tuple[Any, tuple[int, int, int]]:
        """The checkpoint processor's ``smart_resize`` (transformers', the release's companion) and the
        (factor, min_pixels, max_pixels) its ``resize`` passes for ``cfg``."""
        cfg = check_instance("cfg", cfg, ErnieVLConfig, "reference.system.family_configs.family_profile")
        fn = self.source.companions["transformers"].module(PROCESSOR_MODULE).smart_resize
        return fn, (cfg.factor, cfg.min_pixels, cfg.max_pixels)

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """SGLang's pre-resize target, then the checkpoint processor's resize of it, its grid and tokens; a raise of
        either step propagates (a refusal)."""
        second, (factor, low, high) = self.processor_resize(cfg)
        fn, (pre_factor, pre_low, pre_high) = self.pre_resize()
        pre_h, pre_w = fn(height, width, factor=pre_factor, min_pixels=pre_low, max_pixels=pre_high)
        new_h, new_w = (int(v) for v in second(int(pre_h), int(pre_w), factor, min_pixels=low, max_pixels=high))
        gh, gw = new_h // cfg.patch_size, new_w // cfg.patch_size
        return Geometry(new_w, new_h, (1, gh, gw), gh * gw // cfg.merge_size**2)

    def staged_geometry(self, cfg: ErnieVLConfig) -> tuple[str, str, Any, tuple[int, int, int], Any]:
        """(module, name, function, arguments, second stage) for C13's exhaustive sweep
        (`properties.family_geometry`): SGLang's ``smart_resize`` called ``(h, w, factor, min, max)``, then
        the processor's ``smart_resize`` compiled, on its (width, height) grids (`then_processor`)."""
        fn, args = self.pre_resize()
        second = self.cached(("second", cfg), lambda: compiled_second(*self.processor_resize(cfg)))
        return MODULE, "smart_resize", fn, args, lambda found: then_processor(found, second)

    def image_processor(self, cfg: Any) -> Any:
        """The release's transformers ``Ernie4_5_VLMoeImageProcessorPil`` holding ``cfg``'s bounds, patch and merge
        (the checkpoint processor's second resize and layout; semantics §18.9)."""
        cfg = check_instance("cfg", cfg, ErnieVLConfig, "reference.system.family_configs.family_profile")

        def build() -> Any:
            cls = self.source.companions["transformers"].module(PIL_MODULE).Ernie4_5_VLMoeImageProcessorPil
            size = {"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels}
            return cls(size=size, patch_size=cfg.patch_size, merge_size=cfg.merge_size)

        return self.cached(("image_processor", cfg), build)

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(values (N, 3, p*p) of the path's dtype widened, grid (n, 3), tokens per image): each image loaded,
        pre-resized and normalized by SGLang's own code around the processor's levels (module docstring)."""
        cfg = check_instance("cfg", cfg, ErnieVLConfig, "reference.system.family_configs.family_profile")
        modality = self.source.module("managers.schedule_batch").Modality.IMAGE
        cls, proc, ip = self.module.Ernie4_5_VLImageProcessor, self.processor(cfg), self.image_processor(cfg)
        values, grids, tokens = [], [], []
        for image in images:
            loaded = cls._load_single_item(image, modality, discard_alpha_channel=True)
            resized = self.module.resize_image(loaded)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = ip(images=[resized], do_rescale=False, do_normalize=False, return_tensors="pt")
            with common.cpu_engine(self.source):
                normed = proc._pixel_values_norm(out["pixel_values"], {})
            grid = out["image_grid_thw"].to(torch.int64)
            values.append(common.widen(normed).reshape(normed.shape[0], 3, -1))
            grids.append(grid.numpy())
            tokens.append(int(grid.prod()) // cfg.merge_size**2)
        return np.concatenate(values), np.concatenate(grids), tokens

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        values, grid, _ = self.run(images, cfg)
        return values, grid

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): ``_pixel_values_norm`` on every level, each row one patch of a single level."""
        cfg = NormConfig.checked(cfg)
        if not (cfg.do_rescale and cfg.do_normalize):
            raise InputValueError(
                f"{self.name}: _pixel_values_norm always rescales and normalizes; accepted: a config with do_rescale "
                f"and do_normalize on, got do_rescale={cfg.do_rescale}, do_normalize={cfg.do_normalize}"
            )
        proc = self.processor(cfg)
        pixels = torch.arange(256, dtype=torch.float32)[:, None].expand(256, 3 * PATCH * PATCH).contiguous()
        with common.cpu_engine(self.source):
            values = proc._pixel_values_norm(pixels, {})
        return common.widen(values)[:, :: PATCH * PATCH].T.copy()  # channel-major within each patch

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.Ernie4_5_VLImageProcessor"
        return {
            "geometry": f"{MODULE}.smart_resize (own, with the module's IMAGE_FACTOR, MIN_PIXELS, MAX_PIXELS, as "
            f"resize_image calls it), then {PROCESSOR_MODULE}.smart_resize of that size ("
            f"{self.source.companions['transformers'].version}, the checkpoint processor's rule with the config's "
            "bounds; the checkpoints' remote-code processor is not run)",
            "processor": f"{cls}.__init__ (own; the base class's __init__ answered by deferlab; an image processor "
            "stand-in holding the config's image_mean, image_std, rescale_factor)",
            "load": f"{cls}._load_single_item (own, discard_alpha_channel as load_mm_data passes it), then "
            f"{MODULE}.resize_image (own: its smart_resize and Pillow's resize)",
            "serve": f"{PIL_MODULE}.Ernie4_5_VLMoeImageProcessorPil ({self.source.companions['transformers'].version}; "
            "do_rescale and do_normalize off: the levels the checkpoint's remote-code processor hands over, modelled)",
            "normalize": f"{cls}._pixel_values_norm (own, as process_mm_data calls it on the processor's levels)",
            "cast": f"{cls}._pixel_values_norm's .to(hf_config.dtype) (own; hf_config.dtype {self.dtype})",
        }


def compiled_second(fn: Any, args: tuple[int, int, int]) -> compiled.Compiled:
    """The processor's ``smart_resize`` compiled for the sweep's second stage, trusted only once equal to the
    interpreted function on `compiled.check_sizes` (a `compiled.CompileError` otherwise: the sweep then runs the
    path's own geometry on a reduced set)."""
    found = compiled.compile_call(fn, CALL, args, f"{PROCESSOR_MODULE}.smart_resize")
    ws, hs = compiled.check_sizes((PATCH, args[0]), 5600)
    bad = compiled.disagreements(
        found.pairs(ws, hs), compiled.evaluate(compiled.interpreted(fn, CALL, args), ws, hs), ws, hs, ""
    )
    if bad:
        raise compiled.CompileError(f"the compiled {PROCESSOR_MODULE}.smart_resize disagrees at {bad[0]}")
    return found


def then_processor(found: np.ndarray, second: compiled.Compiled) -> np.ndarray:
    """int64 (2, ...) (width, height): the processor's resize (``second``) of SGLang's pre-resize targets ``found``
    ((width, height), `compiled.REFUSED` where SGLang raised), `compiled.REFUSED` where either step refuses."""
    refused = (found == compiled.REFUSED).any(axis=0)
    safe = np.where(refused, 28, found).reshape(2, -1)
    out = second.pairs(safe[0], safe[1]).reshape(found.shape)
    return np.where(refused, compiled.REFUSED, out)
