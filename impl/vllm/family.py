"""What every vLLM family path shares (`FamilyBase`), the normalization-only families' path (`NormPath`), and
the one error a family or release no path covers raises (`NotCovered`).

Why a base: each family path (`reference.system.served.FamilyPath`) answers the same serving questions the
same way (`serving`): whether the device normalizes (the release's resolution for the family's model class),
which norm it builds (the release's ``build_mm_input_norm`` with the layout the class passes), what the path is
called (``VLLM`` for the serving default, ``VLLM host-normalized`` for the host row beside a device default).
A family path takes as ``cfg`` the family's published config dict (``preprocessor_config.json``; InternVL:
``config.json``), the file the release reads, or a typed config of `reference.system.family_configs`, written
back as that file (`config_dict`).

`NormPath` is the families whose pixels vLLM hands the device raw and only normalizes there (its plugin's
`NORM` table: GLM-4.1V, Mistral 3, Gemma 3, Gemma 4, the three Nemotron families): deferlab checks their
normalization (``levels``), not their pixels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.impl.vllm import norm_call, serving
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.served import Geometry


class NotCovered(InputValueError):
    """No vLLM path of deferlab's covers this family at this release (the message says which and why: ``n/a``)."""


def config_dict(cfg: Any) -> dict[str, Any]:
    """The checkpoint file a config stands for: a mapping as it is (the published ``preprocessor_config.json``;
    InternVL's ``config.json``), or one of `reference.system.family_configs`' typed configs written back as the
    file a checkpoint would ship with those values (`QwenVLConfig`, `InternVLConfig`, `NormConfig`);
    `InputTypeError` in one line for anything else."""
    if isinstance(cfg, Mapping):
        return dict(cfg)
    fields = set(getattr(cfg, "__dataclass_fields__", ()))
    keys = [k for k in ("image_mean", "image_std", "rescale_factor", "do_rescale", "do_normalize") if k in fields]
    norm = {k: list(v) if isinstance(v := getattr(cfg, k), tuple) else v for k in keys}
    if {"merge_size", "min_pixels", "max_pixels"} <= fields:  # QwenVLConfig
        size = {"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels}
        keys = ("patch_size", "temporal_patch_size", "merge_size", "do_convert_rgb", "resample")
        return {
            **{k: getattr(cfg, k) for k in keys},
            **norm,
            "size": size,
            "image_processor_type": "Qwen2VLImageProcessor",
        }
    if {"image_size", "min_num", "max_num"} <= fields:  # InternVLConfig (vLLM normalizes with ImageNet's, fixed)
        return {
            "architectures": ["InternVLChatModel"],
            "force_image_size": cfg.image_size,
            "min_dynamic_patch": cfg.min_num,
            "max_dynamic_patch": cfg.max_num,
            "use_thumbnail": cfg.use_thumbnail,
            "dynamic_image_size": cfg.dynamic_image_size,
        }
    if len(norm) == 5:  # NormConfig
        return norm
    raise InputTypeError(
        "cfg must be the family's published config dict (preprocessor_config.json; InternVL: config.json) or a "
        f"QwenVLConfig / InternVLConfig / NormConfig, got {type(cfg).__name__}"
    )


def config_key(cfg: Mapping[str, Any]) -> str:
    """A config dict as a cache key."""
    return json.dumps(cfg, sort_keys=True, default=list)


class FamilyBase:
    """A vLLM family path under one serving setting (subclasses: `model`, ``display``, the steps they run)."""

    real_code = True
    model: serving.ModelClass
    display = ""
    host_path = "host-normalized"  # what the host row is called (InternVL, never device-normalized: "served")
    channels = 3

    def __init__(self, source: Source, family: str, settings: serving.Settings | None = None) -> None:
        self.source = source
        self.family = family
        self.settings = settings or serving.Settings()
        self.system = source.name
        root = Path(source.root)
        if self.model.supports_device_normalize(root) is None:
            raise NotCovered(
                f"n/a: {self.system} has no {self.model.architecture} ({self.model.file}), the class vLLM serves "
                f"{self.display} with"
            )
        self.default_device = serving.resolve_device_normalize(source, self.model, None)
        self.device_normalize = serving.resolve_device_normalize(source, self.model, self.settings.device_normalize)
        self.layout = self.model.norm_layout(root)
        self.path, self.label, self.dtype = serving.roles(
            self.device_normalize, self.default_device, self.settings.dtype, self.host_path
        )
        self.name = f"{self.system} ({self.family}, {self.path})"
        self._norms: dict[str, Any] = {}

    def parsed(self, images: Sequence[Any]) -> list[Any]:
        """The images the release's own input parser hands the processor (C14 reads them against semantics §20.8)."""
        return serving.parse(self.source, images)

    def norm(self, cfg: Any) -> Any:
        """The release's input norm for a checkpoint whose config is ``cfg`` (`serving.input_norm`)."""
        found = config_dict(cfg)
        key = config_key(found)
        if key not in self._norms:
            self._norms[key] = serving.input_norm(self.source, found, self.layout)
        return self._norms[key]

    def levels(self, cfg: Mapping[str, Any]) -> np.ndarray:
        """(C, 256) float32: what the path finally gives each uint8 level of each channel."""
        cfg = config_dict(cfg)
        if self.device_normalize:
            return serving.norm_levels(self.norm(cfg), self.channels, self.layout, self.dtype)
        return self.host_levels(cfg)

    def host_levels(self, cfg: Mapping[str, Any]) -> np.ndarray:
        raise NotCovered(f"n/a: {self.name}: no host-normalized {self.display} path is checked")

    def provenance(self) -> dict[str, str]:
        """The serving steps every family path shares (subclasses add their processor's)."""
        steps = serving.steps(
            self.model, self.settings, self.device_normalize, self.layout, self._norms.values(), self.dtype
        )
        for name, companion in self.source.companions.items():
            steps[f"companion {name}"] = f"{name} {companion.version} ({companion.how})"
        return steps

    def describe(self) -> dict[str, Any]:
        return {
            "engine": "vllm",
            "system": self.system,
            "family": self.family,
            "path": self.path,
            "device_normalize": self.device_normalize,
            "dtype": self.dtype,
            "processor_kwargs": dict(self.settings.processor_kwargs),
            "companions": {n: c.version for n, c in self.source.companions.items()},
        }


class NormPath(FamilyBase):
    """A normalization-only family (vLLM ships its pixels raw and normalizes on the device): ``levels`` only, of
    the config's rescale and normalize (a family config with a geometry, GLM-4.1V's, read as its ``norm``)."""

    # The geometry and pixel claims (C13, C14) this path answers: none, whatever the family's scope (a family judged
    # on geometry on another engine's path), so they are ``n/a`` here with `not_judged` (test_families.py).
    judged_claims: tuple[str, ...] = ()

    def __init__(
        self, source: Source, family: str, model: serving.ModelClass, display: str, settings: serving.Settings | None
    ) -> None:
        self.model, self.display = model, display
        super().__init__(source, family, settings)
        if not self.device_normalize:
            why = (
                "the setting turns it off"
                if self.settings.device_normalize is False
                else "the class does not declare it"
            )
            raise NotCovered(
                f"n/a: {self.system} does not normalize {display} on the device ({why}); deferlab checks only "
                f"{display}'s device normalization"
            )

    @property
    def not_judged(self) -> str:
        """Why C13 and C14 are ``n/a`` on this path, in a few words."""
        return f"vLLM ships {self.display}'s pixels raw and normalizes them on the device, semantics §18.3"

    def levels(self, cfg: Any) -> np.ndarray:
        return super().levels(getattr(cfg, "norm", cfg))

    def norm(self, cfg: Any) -> Any:
        """``build_mm_input_norm``'s norm, or, for a class that builds ``FusedMMInputNorm`` itself (the Nemotron
        families), the release's class with the arguments its own call passes (`norm_call`)."""
        cfg = getattr(cfg, "norm", cfg)  # the rescale and normalize only (this path has no geometry)
        if norm_call.call(Path(self.source.root), self.model) is None:
            return super().norm(cfg)
        found = config_dict(cfg)
        key = config_key(found)
        if key not in self._norms:
            self._norms[key] = norm_call.build(self.source, self.model, found)
        return self._norms[key]

    def provenance(self) -> dict[str, str]:
        steps = super().provenance()
        if "normalize" in steps and norm_call.call(Path(self.source.root), self.model) is not None:
            steps["normalize"] = norm_call.step(self.model, self.dtype)
        return steps

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        raise NotCovered(f"n/a: {self.name}: normalization only (vLLM ships {self.display}'s pixels raw)")

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        raise NotCovered(f"n/a: {self.name}: normalization only (vLLM ships {self.display}'s pixels raw)")
