"""LMDeploy's InternVL 2.5/3 image path, run for real on a CPU (semantics §19.2, §19.5).

What runs is LMDeploy's own code, as ``lmdeploy serve api_server`` runs it for a request image with no ``detail``
and no ``max_dynamic_patch``: the image bytes through ``ImageMediaIO.load_bytes`` (``convert("RGB")``), then
``InternVLVisionModel.build_preprocessor`` (which picks ``_preprocess_v1_5`` and builds the torchvision
transform) and ``InternVLVisionModel.preprocess`` (``_preprocess_v1_5`` -> ``dynamic_preprocess`` ->
``find_closest_aspect_ratio``; min/max tiles and the thumbnail from the config; 256 tokens a tile for 448/14/0.5).
A request's ``detail`` or ``max_dynamic_patch`` can be passed as ``params``, as the server passes them.

What is not LMDeploy's (named by `provenance`): the ``InternVLVisionModel`` object is made without its
``__init__`` (which loads the snapshot's tokenizer only for the image token id); its ``hf_config`` is a namespace
of the checkpoint config's keys, the missing ones from `CHECKPOINT_DEFAULTS`; ``CLIPImageProcessor`` is the
functional stand-in of `impl.lmdeploy.shims`; the feature dtype is set to float32 so the values are read before
the server's cast (``mm_feature_dtype``: BF16 for these checkpoints from 0.16.0, §19.2 step 5).

`geometry` and `sweep` run LMDeploy's ``dynamic_preprocess`` itself on a size-only image (`SizeOnly`: its
``resize`` and ``crop`` only record sizes), so the tile choice, grid and count are its own, without pixels.
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from argparse import Namespace
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.lmdeploy.sources import INTERNVL, MEDIA, Source
from deferlab.reference.system.family_configs import INTERNVL_CHECKPOINT_DEFAULTS

__all__ = ["CHECKPOINT_DEFAULTS", "InternVLPath", "Served", "SizeOnly"]

CHECKPOINT_DEFAULTS = INTERNVL_CHECKPOINT_DEFAULTS  # the checkpoints' config.json values (semantics §18.5)


class SizeOnly:
    """A stand-in image for geometry: ``size``, ``resize`` and ``crop`` as Pillow's, without pixels."""

    __slots__ = ("size",)

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size

    def resize(self, size: tuple[int, int], *args: Any, **kwargs: Any) -> SizeOnly:
        return SizeOnly((int(size[0]), int(size[1])))

    def crop(self, box: tuple[int, int, int, int]) -> SizeOnly:
        return SizeOnly((box[2] - box[0], box[3] - box[1]))


@dataclass
class Served:
    """What LMDeploy hands the tower for one image."""

    tiles: int  # thumbnail included
    grid: tuple[int, int]  # (cols, rows)
    thumbnail: bool
    pixels: np.ndarray  # float32 (tiles, 3, s, s), before the server's dtype cast
    tokens: int
    mode_in: str  # the mode the image bytes decode to before LMDeploy's conversion
    encoding: str  # how the PIL image was turned into request bytes (lossless)


def _settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    out = {k: CHECKPOINT_DEFAULTS[k] if cfg.get(k) is None else cfg[k] for k in CHECKPOINT_DEFAULTS}
    out["image_size"] = vision.get("image_size") or cfg.get("force_image_size") or CHECKPOINT_DEFAULTS["image_size"]
    out["patch_size"] = vision.get("patch_size") or CHECKPOINT_DEFAULTS["patch_size"]
    return out


def _encode(image: Image.Image) -> tuple[bytes, str]:
    """The image as request bytes that decode to the same mode and pixels: PNG where Pillow writes the mode,
    else TIFF. RGBX (whose fourth band is padding, no information) is written by TIFF as the RGB it holds: no file
    keeps the padding, and the pixels are the same."""
    for fmt in ("PNG", "TIFF"):
        buf = io.BytesIO()
        try:
            image.save(buf, fmt)
        except (OSError, ValueError, KeyError):
            continue
        data = buf.getvalue()
        back = Image.open(io.BytesIO(data))
        if back.mode == image.mode or (image.mode, back.mode) == ("RGBX", "RGB"):
            return data, fmt
    raise ValueError(f"deferlab cannot encode a {image.mode} image losslessly as request bytes (PNG, TIFF)")


class InternVLPath:
    """LMDeploy's InternVL path of one loaded release (`sources.load`, with ``companions=("torchvision",)`` for
    `serve`)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.system = source.name
        self._internvl = source.module(INTERNVL)
        self._media = source.module(MEDIA)
        self._models: dict[str, Any] = {}

    # -- geometry: LMDeploy's dynamic_preprocess on a size-only image -----------------------------------------
    def geometry(
        self, width: int, height: int, cfg: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None
    ) -> tuple[int, int, int]:
        """(cols, rows, tiles with the thumbnail) as LMDeploy's server tiles a ``width x height`` image."""
        s = _settings(cfg or {})
        max_num = self.max_num(s, params or {})
        return self._tiles(width, height, s["min_dynamic_patch"], max_num, s["image_size"], s["use_thumbnail"])

    def _tiles(self, width: int, height: int, lo: int, hi: int, size: int, thumb: bool) -> tuple[int, int, int]:
        sized: list[tuple[int, int]] = []

        class Recording(SizeOnly):
            __slots__ = ()

            def resize(self, new: tuple[int, int], *a: Any, **k: Any) -> SizeOnly:
                sized.append((int(new[0]), int(new[1])))
                return SizeOnly(new)

        out = self._internvl.dynamic_preprocess(
            Recording((width, height)), min_num=lo, max_num=hi, image_size=size, use_thumbnail=thumb
        )
        canvas = sized[0]
        return canvas[0] // size, canvas[1] // size, len(out)

    @staticmethod
    def max_num(settings: Mapping[str, Any], params: Mapping[str, Any]) -> int:
        """What ``_preprocess_v1_5`` passes as ``max_num`` (semantics §19.2 step 3), for the geometry-only path;
        `serve` runs the method itself."""
        value = params.get("max_dynamic_patch")
        if isinstance(value, int):
            return value
        return {"low": 6, "medium": 12, "high": 24}.get(params.get("detail", "default"), settings["max_dynamic_patch"])

    def sweep(
        self, widths: np.ndarray, heights: np.ndarray, cfg: Mapping[str, Any] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(cols, rows, tiles) for every pair of ``widths x heights`` (outer product, heights first) by
        LMDeploy's own function, and the seconds it took."""
        s = _settings(cfg or {})
        args = (s["min_dynamic_patch"], s["max_dynamic_patch"], s["image_size"], s["use_thumbnail"])
        shape = (len(heights), len(widths))
        cols, rows, n = (np.empty(shape, np.int32) for _ in range(3))
        dp = self._internvl.dynamic_preprocess
        lo, hi, size, thumb = args
        t0 = time.perf_counter()
        for i, h in enumerate(heights.tolist()):
            for j, w in enumerate(widths.tolist()):
                img = _Canvas((w, h))
                k = len(dp(img, min_num=lo, max_num=hi, image_size=size, use_thumbnail=thumb))
                cols[i, j], rows[i, j], n[i, j] = img.canvas[0] // size, img.canvas[1] // size, k
        return cols, rows, n, time.perf_counter() - t0

    # -- pixels: the server's own load and preprocess ----------------------------------------------------------
    def model(self, cfg: Mapping[str, Any] | None = None) -> Any:
        """An ``InternVLVisionModel`` whose ``build_preprocessor`` ran for real on the config's values."""
        s = _settings(cfg or {})
        key = repr(sorted(s.items()))
        if key not in self._models:
            cls = self._internvl.InternVLVisionModel
            model = cls.__new__(cls)
            model.hf_config = Namespace(
                vision_config={"image_size": s["image_size"], "patch_size": s["patch_size"]},
                **{k: s[k] for k in CHECKPOINT_DEFAULTS if k not in ("image_size", "patch_size")},
            )
            model.image_token_id = -1
            with tempfile.TemporaryDirectory(prefix="deferlab-lmdeploy-") as empty:  # a snapshot without a processor
                model.model_path = empty
                model.build_preprocessor()
            model.set_mm_feature_dtype(torch.float32)
            self._models[key] = model
        return self._models[key]

    def serve(
        self, image: Image.Image, cfg: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None
    ) -> Served:
        """What LMDeploy's server feeds the tower for ``image`` sent as request bytes."""
        data, fmt = _encode(image)
        loaded = self._media.ImageMediaIO().load_bytes(data)
        model = self.model(cfg)
        messages = [{"role": "user", "content": [{"type": "image", "data": loaded, **dict(params or {})}]}]
        with torch.no_grad():
            out = model.preprocess(messages)[-1]["content"][0]
        pixels = out["pixel_values"]
        cols, rows, n = self.geometry(*loaded.size, cfg, params)
        if pixels.shape[0] != n:
            raise RuntimeError(f"{self.system}: {pixels.shape[0]} tiles served for {loaded.size}, {n} by its geometry")
        return Served(
            tiles=int(pixels.shape[0]),
            grid=(cols, rows),
            thumbnail=n > cols * rows,
            pixels=pixels.float().numpy(),
            tokens=int(out["image_tokens"]),
            mode_in=Image.open(io.BytesIO(data)).mode,
            encoding=fmt,
        )

    def provenance(self) -> dict[str, str]:
        transformers = sys.modules.get("transformers")
        origin = (
            "deferlab's functional stand-in (impl.lmdeploy.shims)"
            if getattr(transformers, "__deferlab_standin__", False)
            else f"installed {getattr(transformers, '__version__', '?')} (not the release's pin)"
        )
        return {
            "transformers": f"{origin}: only CLIPImageProcessor.from_pretrained runs, on an empty folder (OSError)",
            "load": f"real: {MEDIA}.ImageMediaIO.load_bytes (convert('RGB'))",
            "geometry": f"real: {INTERNVL}.dynamic_preprocess on a size-only image (find_closest_aspect_ratio)",
            "serve": f"real: {INTERNVL}.InternVLVisionModel.build_preprocessor, preprocess, _preprocess_v1_5, "
            "dynamic_preprocess; torchvision Resize, ToTensor, Normalize (companion)",
            "modelled": "InternVLVisionModel made without __init__ (tokenizer), model_path an empty folder; hf_config a namespace of the config "
            f"dict's keys (missing ones: {CHECKPOINT_DEFAULTS}); CLIPImageProcessor a functional stand-in raising "
            "OSError; mm_feature_dtype float32 (the server casts to the config's dtype from 0.16.0)",
        }


class _Canvas(SizeOnly):
    """`SizeOnly` that remembers the size of its first resize (the canvas ``dynamic_preprocess`` crops)."""

    __slots__ = ("canvas",)

    def __init__(self, size: tuple[int, int]) -> None:
        super().__init__(size)
        self.canvas = (0, 0)

    def resize(self, size: tuple[int, int], *args: Any, **kwargs: Any) -> SizeOnly:
        if self.canvas == (0, 0):
            self.canvas = (int(size[0]), int(size[1]))
        return SizeOnly(size)
