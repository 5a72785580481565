"""LMDeploy's paths for a model family (`paths`): what the served claims (C13-C15) judge against the checkpoint.

Why an adapter: `impl.lmdeploy.internvl.InternVLPath` runs LMDeploy's own code and returns what the server hands
the tower per image; the claims read every engine through one protocol (`reference.system.served.FamilyPath`:
``geometry``, ``serve``, ``levels``, ``provenance``), so this module restates those answers in its terms. One
path per family, LMDeploy's default serving setting (``LMDEPLOY``): a request with no ``detail`` and no
``max_dynamic_patch``, the checkpoint config's values (semantics §19.2). A family LMDeploy's own code does not
preprocess raises `NotCovered` (its claims record ``n/a``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from deferlab.impl.lmdeploy.internvl import InternVLPath
from deferlab.impl.lmdeploy.sources import COMPANIONS as INTERNVL_COMPANIONS
from deferlab.impl.lmdeploy.sources import Source
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.served import Geometry

LABEL = "LMDEPLOY"
FAMILIES = ("internvl",)
COMPANIONS = {"internvl": INTERNVL_COMPANIONS}  # what each family's path runs beside deferlab's dependencies


class NotCovered(InputValueError):
    """No LMDeploy path of deferlab's covers this family (the message says which and why: ``n/a``)."""


def config_dict(cfg: Any) -> dict[str, Any]:
    """InternVL's ``config.json`` keys LMDeploy reads, from the dict itself or a typed config with the card's
    fields (``image_size``, ``min_num``, ``max_num``, ``use_thumbnail``, ``dynamic_image_size``)."""
    if isinstance(cfg, Mapping):
        return dict(cfg)
    try:
        return {
            "force_image_size": cfg.image_size,
            "min_dynamic_patch": cfg.min_num,
            "max_dynamic_patch": cfg.max_num,
            "use_thumbnail": cfg.use_thumbnail,
            "dynamic_image_size": cfg.dynamic_image_size,
        }
    except AttributeError:
        raise InputTypeError(
            f"cfg must be InternVL's config.json dict or a config with its tiling fields, got {type(cfg).__name__}"
        ) from None


class InternVLServed:
    """LMDeploy's InternVL path as a `FamilyPath` (host-normalized: no release normalizes on the device)."""

    family = "internvl"
    label = LABEL
    path = "served"
    dtype = "float32"  # the values before the server's cast to the config's dtype (§19.2 step 5)
    real_code = True
    channels = 3
    # C13's exhaustive part (properties.family_geometry): why nothing of LMDeploy's is compiled
    geometry_note = (
        "LMDeploy's dynamic_preprocess resizes and crops the image itself: its own function runs interpreted "
        "(on size-only images) over the reduced set; deferlab's restatement (impl.lmdeploy.geometry) is not the "
        "engine's code"
    )

    def __init__(self, source: Source) -> None:
        self.source = source
        self.system = source.name
        self.name = f"{self.system} (internvl, served)"
        self._path = InternVLPath(source)

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """LMDeploy's ``dynamic_preprocess`` on a size-only image: canvas, (rows, cols, tiles), and the tokens as its
        ``preprocess`` counts them (tiles x the ``image_tokens_per_patch`` its ``build_preprocessor`` set)."""
        found = config_dict(cfg)
        cols, rows, tiles = self._path.geometry(width, height, found)
        model = self._path.model(found)
        size = int(model.hf_config.vision_config["image_size"])
        return Geometry(cols * size, rows * size, (rows, cols, tiles), tiles * int(model.image_tokens_per_patch))

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        found = config_dict(cfg)
        values, grids = [], []
        for image in images:
            out = self._path.serve(image, found)
            values.append(out.pixels.reshape(out.tiles, self.channels, -1))
            grids.append((out.grid[1], out.grid[0], out.tiles))
        return np.concatenate(values), np.asarray(grids, np.int64).reshape(-1, 3)

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what LMDeploy's own transform gives each level, from a 448x448 image holding every level
        (one tile: its Resize is the identity, so each level is its normalization alone)."""
        found = config_dict(cfg)
        size = int(found.get("force_image_size") or 448)
        ramp = np.resize(np.arange(256, dtype=np.uint8), size * size).reshape(size, size)
        image = Image.fromarray(np.stack([ramp] * 3, axis=-1), "RGB")
        out = self._path.serve(image, {**found, "min_dynamic_patch": 1, "max_dynamic_patch": 1})
        flat = out.pixels[0].reshape(self.channels, -1)
        return flat[:, :256].astype(np.float32)

    def provenance(self) -> dict[str, str]:
        return self._path.provenance()


def paths(source: Source, family: str, settings: Mapping[str, Any] | None = None, **_: Any) -> list[Any]:
    """LMDeploy's paths for ``family`` on the loaded ``source``: its one serving setting (``settings`` and the
    Kimi-K3 options every engine's ``paths`` is given change nothing here)."""
    if family == "internvl":
        return [InternVLServed(source)]
    raise NotCovered(f"n/a: no LMDeploy path for model family {family!r} is checked; accepted: {', '.join(FAMILIES)}")
