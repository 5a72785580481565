"""transformers' own torchvision backend of the Qwen2-VL image processor as a row of its own (a
`reference.system.served.FamilyPath`, semantics §18.2): judged against the PIL backend, the trained side.

What runs: the installed transformers (the ``transformers`` extra's pin, 5.24.0, the trained side's version)
``models.qwen2_vl.image_processing_qwen2_vl.Qwen2VLImageProcessor`` (``TorchvisionBackend``), built with
``from_dict`` from the family's published config (`reference.system.family_configs`), as ``from_pretrained``
builds it from a checkpoint's ``preprocessor_config.json``; its module's ``smart_resize`` for the geometry, its
``rescale_and_normalize`` on the 256 levels for the table. torchvision is not installed here: it is the loader's
companion (`impl.loader.companions.TORCHVISION`, its Python only, the compiled ops' schemas declared), at the
series the running torch pairs with (transformers pins no torchvision outside its extras, so the companion's
``unpinned`` rule applies: torch 2.13 -> ``==0.28.*``).

One process, one transformers: the row needs the installed transformers, with torchvision importable before
transformers' image backends are imported (``image_processing_backends`` binds ``tvF`` at import, and
``is_torchvision_available`` is cached). A process that imported another transformers, or the backends
without torchvision, is refused in one line (`Unavailable`), as is a torchvision that cannot be had (not
cached under ``DEFERLAB_OFFLINE=1``, no index).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.impl.loader import companions, wheels
from deferlab.impl.loader.provenance import Records
from deferlab.impl.vllm.family import config_dict
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import published_config
from deferlab.reference.system.served import Geometry

TRANSFORMERS_VERSION = "5.24.0"  # the trained side's (the ``transformers`` extra's pin, semantics §18.1)
MODULE = "transformers.models.qwen2_vl.image_processing_qwen2_vl"
CLASS = "Qwen2VLImageProcessor"
BACKENDS = "transformers.image_processing_backends"
FAMILIES = {"qwen2.5-vl": "Qwen2.5-VL", "qwen3-vl": "Qwen3-VL"}
_NOT_READ = ("image_processor_type", "processor_class")  # the file's class names, not processor kwargs


class Unavailable(RuntimeError):
    """The row cannot run in this process (the one-line message says why)."""


def _one_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _installed_transformers() -> tuple[str, Path]:
    """(version, package folder) of the installed transformers; `Unavailable` when this process runs another."""
    try:
        dist = importlib.metadata.distribution("transformers")
    except importlib.metadata.PackageNotFoundError:
        raise Unavailable("n/a: transformers is not installed (the 'transformers' extra)") from None
    tree = Path(str(dist.locate_file("transformers"))).resolve()
    present = sys.modules.get("transformers")
    where = Path(str(getattr(present, "__file__", "") or "")).resolve().parent if present is not None else tree
    if where != tree:
        raise Unavailable(
            f"n/a: this process runs transformers {getattr(present, '__version__', '?')} from {where}, not the "
            f"installed {dist.version}: run the torchvision-backend row in a process of its own"
        )
    if dist.version != TRANSFORMERS_VERSION:
        raise Unavailable(
            f"n/a: the installed transformers is {dist.version}; the row is transformers {TRANSFORMERS_VERSION}'s "
            "(the 'transformers' extra's pin, the trained side's version)"
        )
    return dist.version, tree


def provide_torchvision(records: Records) -> companions.Loaded:
    """torchvision made importable for the installed transformers through the loader's companion mechanism
    (`companions.load`); `Unavailable` in one line when it cannot be (not cached offline, no index, another copy
    in this process, transformers' backends imported without it)."""
    version, tree = _installed_transformers()
    backends = sys.modules.get(BACKENDS)
    if backends is not None and not hasattr(backends, "tvF"):
        raise Unavailable(
            f"n/a: {BACKENDS} was imported in this process before torchvision was importable (its tvF is unbound): "
            "build the torchvision-backend row before anything imports transformers' image processors, or in a "
            "process of its own"
        )
    try:
        loaded = companions.load(companions.TORCHVISION, tree, f"transformers {version}", records)
    except (wheels.DownloadError, companions.CompanionError, InputValueError) as e:
        raise Unavailable(f"n/a: torchvision for transformers {version}'s torchvision backend: {_one_line(e)}") from e
    from transformers.utils import import_utils

    if not import_utils.is_torchvision_available():
        raise Unavailable(
            "n/a: transformers decided torchvision is unavailable before the companion was active "
            "(is_torchvision_available is cached): run the row in a process of its own"
        )
    return loaded


class TorchvisionBackendPath:
    """transformers' torchvision-backend Qwen2-VL image processor for one Qwen family (the ``TRANSFORMERS
    torchvision`` row): host-normalized, float32, run for real."""

    label, path, dtype, real_code, channels = "TRANSFORMERS torchvision", "torchvision-backend", "float32", True, 3

    def __init__(self, family: str, records: Records | None = None) -> None:
        if family not in FAMILIES:
            raise InputValueError(
                f"n/a: no torchvision-backend row for family {family!r}; accepted: {', '.join(FAMILIES)}"
            )
        self.family, self.display = family, FAMILIES[family]
        self.records = Records() if records is None else records
        self.torchvision = provide_torchvision(self.records)
        self.module = importlib.import_module(MODULE)
        self.processor_class = getattr(self.module, CLASS)
        version = importlib.import_module("transformers").__version__
        self.system = f"transformers-{version}"
        self.name = f"{self.system} {self.display} torchvision backend"
        self._built: dict[str, Any] = {}

    def processor(self, cfg: Any = None) -> Any:
        """The processor for ``cfg`` (the published config dict, or a typed config written back as one by
        `impl.vllm.family.config_dict`; None: the family's published config), built as ``from_pretrained`` does."""
        found = published_config(self.family) if cfg is None else config_dict(cfg)
        found = {k: v for k, v in found.items() if k not in _NOT_READ}
        key = json.dumps(found, sort_keys=True, default=list)
        if key not in self._built:
            self._built[key] = self.processor_class.from_dict(found)
        return self._built[key]

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        ip = self.processor(cfg)
        p, m = int(ip.patch_size), int(ip.merge_size)
        h, w = self.module.smart_resize(
            height, width, factor=p * m, min_pixels=ip.size["shortest_edge"], max_pixels=ip.size["longest_edge"]
        )
        gh, gw = h // p, w // p
        return Geometry(int(w), int(h), (1, gh, gw), gh * gw // (m * m))

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        out = self.processor(cfg)(images=list(images), return_tensors="pt")
        values = out["pixel_values"].float().numpy()
        return values.reshape(values.shape[0], self.channels, -1), out["image_grid_thw"].numpy().astype(np.int64)

    def levels(self, cfg: Any) -> np.ndarray:
        """The processor's own ``rescale_and_normalize`` on the 256 uint8 levels, the call its ``_preprocess``
        makes on the resized uint8 images."""
        import torch

        ip = self.processor(cfg)
        u = torch.arange(256, dtype=torch.uint8).repeat(self.channels).reshape(1, self.channels, 1, 256)
        out = ip.rescale_and_normalize(
            u, ip.do_rescale, ip.rescale_factor, ip.do_normalize, ip.image_mean, ip.image_std
        )
        return np.ascontiguousarray(out.float().numpy().reshape(self.channels, 256))

    def provenance(self) -> dict[str, str]:
        name = f"{MODULE}.{CLASS}"
        tv = self.torchvision
        return {
            "geometry": f"real: {MODULE}.smart_resize (the processor's patch_size * merge_size and size)",
            "serve": f"real: transformers {name}.__call__ (TorchvisionBackend), built by from_dict with the "
            "family's published config",
            "levels": f"real: {name}.rescale_and_normalize on the 256 uint8 levels",
            "torchvision": f"companion: torchvision {tv.version} from {tv.tree} ({tv.how}); {companions.TORCHVISION.note}",
        }
