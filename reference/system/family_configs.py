"""Config types of the model families beyond Kimi-K3 (semantics §18), with their published values.

Why typed configs: each family's trained side reads a published ``preprocessor_config.json`` (or, for
InternVL, its ``config.json``) the way transformers or the model card does, and a bad value must fail at
the front door in one line (which key, the value, what is accepted) rather than inside a sweep. The
readers take transformers' rules for what a config leaves out: a missing key, or one set to ``null``,
takes the default of the image-processor class the config names (transformers 5.24.0, §18.1); keys the
trained side does not read (``do_resize``'s siblings, video settings, ``auto_map``...) are ignored, as
transformers ignores them.

* `QwenVLConfig`: Qwen2-VL's image processor (Qwen2.5-VL and Qwen3-VL differ only in values).
* `InternVLConfig`: InternVL 2.5/3 as the model card's ``load_image`` tiles and normalizes.
* `NormConfig`: the rescale and normalize of a transformers image processor (the normalization-only
  families, and the normalization part of the two above).

``PROFILES`` maps each family's profile name to ``(config, source)``; the published dicts themselves are
in ``PUBLISHED`` (the tests hand them to transformers), with transformers' class defaults in
`reference.system.family_configs_published` (re-exported here); how a config is read is
`reference.system.family_configs_read`. Each type declares its family ``kind`` and its ``norm``: what code
elsewhere asks of a config, instead of testing its type.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

from deferlab.reference.system import family_configs_read as read
from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from deferlab.reference.system.family_configs_minicpm import config_type as minicpm_config_type
from deferlab.reference.system.family_configs_published import (
    BICUBIC,
    CLASS_DEFAULTS,
    CLIP_MEAN,
    CLIP_STD,
    HALF,
    IMAGENET_MEAN,
    IMAGENET_STD,
    INTERNVL_ARCHITECTURES,
    INTERNVL_CHECKPOINT_DEFAULTS,
    PUBLISHED,
    QWEN_CLASSES,
    RESAMPLE,
    RESCALE,
    SOURCES,
)
from deferlab.reference.system.family_configs_read import base_class, processor_class
from deferlab.reference.system.validate import check_bool, check_int, check_number, check_positive_int, type_name

__all__ = [  # the published values and the readers' helpers are read from here too
    "BICUBIC", "CLASS_DEFAULTS", "CLIP_MEAN", "CLIP_STD", "CONFIG_TYPES", "HALF", "IMAGENET_MEAN", "IMAGENET_STD",
    "INTERNVL_ARCHITECTURES", "INTERNVL_CHECKPOINT_DEFAULTS", "PROFILES", "PUBLISHED", "QWEN_CLASSES", "RESAMPLE",
    "RESCALE", "SOURCES", "InternVLConfig", "NormConfig", "PaddleOCRVLConfig", "QwenVLConfig", "base_class",
    "family_profile", "norm_of", "processor_class", "published_config",
]  # fmt: skip
_C = TypeVar("_C")


def _floats(name: str, value: Any, *, positive: bool = False) -> tuple[float, ...]:
    """A non-empty list of finite numbers (std: each > 0); one number means that value in 3 channels, as
    transformers' normalize reads a scalar for an RGB image."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = [value] * 3
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__len__") or len(value) == 0:
        raise InputTypeError(f"{name} must be a non-empty list of numbers (one per channel), got {value!r}")
    kw = {"minimum": 0.0, "exclusive_minimum": True} if positive else {}
    return tuple(check_number(f"{name}[{i}]", v, **kw) for i, v in enumerate(value))


def _three(name: str, value: tuple[float, ...]) -> tuple[float, ...]:
    if len(value) != 3:
        raise InputValueError(f"{name} must have 3 values (one per RGB channel), got {len(value)}: {list(value)}")
    return value


@dataclass(frozen=True)
class NormConfig:
    """A transformers image processor's rescale and normalize: ``x = f32(f64(u) * rescale_factor)`` when
    ``do_rescale``, then ``(x - mean) / std`` in float32 when ``do_normalize`` (semantics §18.1)."""

    kind: ClassVar[str] = "norm"  # the family kind this type is (`CONFIG_TYPES`): normalization only

    image_mean: tuple[float, ...]
    image_std: tuple[float, ...]
    rescale_factor: float = RESCALE
    do_rescale: bool = True
    do_normalize: bool = True

    def __post_init__(self) -> None:
        mean = _floats("image_mean", self.image_mean)
        std = _floats("image_std", self.image_std, positive=True)
        if len(mean) != len(std):
            raise InputValueError(
                f"image_mean and image_std must have the same length (one value per channel), got {len(mean)} and "
                f"{len(std)}"
            )
        object.__setattr__(self, "image_mean", mean)
        object.__setattr__(self, "image_std", std)
        rescale = check_number("rescale_factor", self.rescale_factor, minimum=0.0, exclusive_minimum=True)
        object.__setattr__(self, "rescale_factor", rescale)
        object.__setattr__(self, "do_rescale", check_bool("do_rescale", self.do_rescale))
        object.__setattr__(self, "do_normalize", check_bool("do_normalize", self.do_normalize))

    @property
    def channels(self) -> int:
        return len(self.image_mean)

    @property
    def norm(self) -> NormConfig:
        return self

    @classmethod
    def checked(cls, cfg: Any) -> NormConfig:
        """``cfg`` itself when it is a `NormConfig`; else `InputTypeError` in one line (what a normalization-only
        oracle takes)."""
        if not isinstance(cfg, cls):
            raise InputTypeError(f"cfg must be a NormConfig (reference.system.family_configs), got {type_name(cfg)}")
        return cfg

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> NormConfig:
        """Read the five keys as transformers does: a missing or ``null`` key takes the named class's default;
        `ConfigError` when neither says (an unknown class that leaves a key out)."""
        return _reading(name, lambda: cls(**read.values(cfg, read.NORM_KEYS, name)))


class _PatchedNorm:
    """What a config with a patch grid and its own normalization fields derives (`ErnieVLConfig`, `QwenVLConfig`
    and their kin): one property each, so the two families cannot drift apart on them."""

    @property
    def factor(self) -> int:
        """patch_size * merge_size: every resized side is a multiple of it."""
        return self.patch_size * self.merge_size

    @property
    def norm(self) -> NormConfig:
        return NormConfig(self.image_mean, self.image_std, self.rescale_factor, self.do_rescale, self.do_normalize)


@dataclass(frozen=True)
class ErnieVLConfig(_PatchedNorm, NormConfig):
    """ERNIE-4.5-VL's image processor (transformers ``Ernie4_5_VLMoeImageProcessor``; semantics §18.9): the
    rescale and normalize of a `NormConfig` and its own ``smart_resize`` bounds (`reference.oracle.ernie45_vl`);
    judged on geometry and normalization (its pixels are not restated)."""

    kind: ClassVar[str] = "ernie"  # the family kind this type is (`CONFIG_TYPES`)

    patch_size: int = 14
    merge_size: int = 2
    min_pixels: int = 56 * 56  # the class's size["shortest_edge"]
    max_pixels: int = 28 * 28 * 6177  # the class's size["longest_edge"]

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("patch_size", "merge_size", "min_pixels", "max_pixels"):
            object.__setattr__(self, key, check_positive_int(key, getattr(self, key)))
        if self.min_pixels > self.max_pixels:
            raise InputValueError(f"min_pixels must be <= max_pixels, got {self.min_pixels} > {self.max_pixels}")

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> ErnieVLConfig:
        """The five normalization keys as `NormConfig` reads them; ``patch_size``, ``merge_size`` and ``size``
        (``shortest_edge``, ``longest_edge``: the pixel bounds) where the config has them, else the class's."""
        geometry: dict[str, Any] = {k: cfg[k] for k in ("patch_size", "merge_size") if cfg.get(k) is not None}
        size = cfg.get("size")
        if isinstance(size, Mapping):
            bounds = (("shortest_edge", "min_pixels"), ("longest_edge", "max_pixels"))
            geometry.update({key: size[edge] for edge, key in bounds if size.get(edge) is not None})
        return _reading(name, lambda: cls(**read.values(cfg, read.NORM_KEYS, name), **geometry))


@dataclass(frozen=True)
class MiMoConfig(ErnieVLConfig):
    """MiMo-V2.5's checkpoint processor (a ``Qwen2VLImageProcessor`` config; semantics §18.9): `ErnieVLConfig`'s
    fields and reading with Qwen2-VL's class defaults; its geometry is Qwen's rule (`qwen`)."""

    kind: ClassVar[str] = "mimo"  # the family kind this type is (`CONFIG_TYPES`)

    max_pixels: int = 28 * 28 * 1280  # Qwen2VLImageProcessor's size["longest_edge"]

    @property
    def qwen(self) -> QwenVLConfig:
        """The same bounds as the `QwenVLConfig` `reference.oracle.qwen` takes (its geometry is Qwen's)."""
        return QwenVLConfig(
            patch_size=self.patch_size,
            merge_size=self.merge_size,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


@dataclass(frozen=True)
class Glm4vConfig(ErnieVLConfig):
    """GLM-4.1V's checkpoint processor (transformers ``Glm4vImageProcessor``; semantics §18.9): `ErnieVLConfig`'s
    fields and reading with Glm4v's defaults and its temporal patch (``T * h * w`` is held to the bounds)."""

    kind: ClassVar[str] = "glm4v"  # the family kind this type is (`CONFIG_TYPES`): `reference.oracle.glm4v`

    min_pixels: int = 12544  # the class's size["shortest_edge"]
    max_pixels: int = 9633792  # the class's size["longest_edge"]
    temporal_patch_size: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(
            self, "temporal_patch_size", check_positive_int("temporal_patch_size", self.temporal_patch_size)
        )

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> Glm4vConfig:
        """`ErnieVLConfig`'s reading, and ``temporal_patch_size`` where the config has it."""
        found = super().from_preprocessor_config(cfg, name=name)
        if cfg.get("temporal_patch_size") is None:
            return found
        return _reading(name, lambda: replace(found, temporal_patch_size=cfg["temporal_patch_size"]))


def _reading(name: str, build: Callable[[], _C]) -> _C:
    """Run ``build``; a validation error becomes `ConfigError` naming the config (one line)."""
    try:
        return build()
    except ConfigError:
        raise
    except (InputValueError, InputTypeError) as e:
        raise ConfigError(f"preprocessor config {name!r}: {e}") from None


@dataclass(frozen=True)
class QwenVLConfig(_PatchedNorm):
    """Qwen2-VL's image processor settings (transformers ``Qwen2VLImageProcessor``; semantics §18.2)."""

    kind: ClassVar[str] = "qwen"  # the family kind this type is (`CONFIG_TYPES`)

    patch_size: int = 14
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 1280
    image_mean: tuple[float, ...] = CLIP_MEAN
    image_std: tuple[float, ...] = CLIP_STD
    rescale_factor: float = RESCALE
    do_rescale: bool = True
    do_normalize: bool = True
    do_convert_rgb: bool = True
    resample: int = BICUBIC

    def __post_init__(self) -> None:
        for key in ("patch_size", "temporal_patch_size", "merge_size", "min_pixels", "max_pixels"):
            object.__setattr__(self, key, check_positive_int(key, getattr(self, key)))
        if self.min_pixels > self.max_pixels:
            raise InputValueError(
                f"min_pixels (size.shortest_edge) must be <= max_pixels (size.longest_edge), got {self.min_pixels} "
                f"> {self.max_pixels}"
            )
        norm = self.norm  # validates mean, std, rescale and the two flags
        object.__setattr__(self, "image_mean", _three("image_mean", norm.image_mean))
        object.__setattr__(self, "image_std", _three("image_std", norm.image_std))
        object.__setattr__(self, "rescale_factor", norm.rescale_factor)
        object.__setattr__(self, "do_convert_rgb", check_bool("do_convert_rgb", self.do_convert_rgb))
        resample = check_int("resample", self.resample, minimum=0, maximum=5)
        object.__setattr__(self, "resample", resample)

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> QwenVLConfig:
        """Read a Qwen2-VL-family config as transformers 5.24.0 does: ``size.shortest_edge`` /
        ``size.longest_edge`` bound the pixels, the legacy top-level ``min_pixels`` / ``max_pixels`` override
        them; a ``size`` without both bounds is refused (transformers' resize refuses it at call time);
        ``do_resize`` must be true (the restatement always resizes)."""
        return _reading(name, lambda: cls(**read.qwen_values(cfg, name)))


@dataclass(frozen=True)
class PaddleOCRVLConfig(QwenVLConfig):
    """PaddleOCR-VL's image processor settings (transformers ``PaddleOCRVLImageProcessor``; semantics §18.9):
    Qwen2-VL's fields and reading, its own ``smart_resize`` and patch layout (`reference.oracle.paddleocr`)."""

    kind: ClassVar[str] = "paddleocr"  # the family kind this type is (`CONFIG_TYPES`)

    temporal_patch_size: int = 1
    min_pixels: int = 384 * 384
    max_pixels: int = 1536 * 1536

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> PaddleOCRVLConfig:
        """Read a PaddleOCR-VL config as transformers 5.24.0 does (the legacy ``min_pixels`` / ``max_pixels``
        override ``size``, as for Qwen2-VL)."""
        return _reading(name, lambda: cls(**read.paddleocr_values(cfg, name)))


@dataclass(frozen=True)
class InternVLConfig:
    """InternVL 2.5/3 preprocessing as the model card's ``load_image`` runs it (semantics §18.4): tiles of
    ``image_size``, a grid of ``min_num``..``max_num`` tiles, a thumbnail when ``use_thumbnail`` and more than
    one tile; ``dynamic_image_size`` off means one tile (min = max = 1, as vLLM reads it)."""

    kind: ClassVar[str] = "internvl"  # the family kind this type is (`CONFIG_TYPES`)

    image_size: int = 448
    min_num: int = 1
    max_num: int = 12
    use_thumbnail: bool = True
    dynamic_image_size: bool = True
    image_mean: tuple[float, ...] = IMAGENET_MEAN
    image_std: tuple[float, ...] = IMAGENET_STD

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_size", check_positive_int("image_size (force_image_size)", self.image_size))
        object.__setattr__(self, "min_num", check_positive_int("min_num (min_dynamic_patch)", self.min_num))
        object.__setattr__(self, "max_num", check_positive_int("max_num (max_dynamic_patch)", self.max_num))
        if self.min_num > self.max_num:
            raise InputValueError(
                f"min_num (min_dynamic_patch) must be <= max_num (max_dynamic_patch), got {self.min_num} > "
                f"{self.max_num}"
            )
        object.__setattr__(self, "use_thumbnail", check_bool("use_thumbnail", self.use_thumbnail))
        object.__setattr__(self, "dynamic_image_size", check_bool("dynamic_image_size", self.dynamic_image_size))
        object.__setattr__(self, "image_mean", _three("image_mean", _floats("image_mean", self.image_mean)))
        object.__setattr__(self, "image_std", _three("image_std", _floats("image_std", self.image_std, positive=True)))

    @property
    def bounds(self) -> tuple[int, int]:
        """(min, max) tiles the grid may have: the config's when dynamic, else (1, 1)."""
        return (self.min_num, self.max_num) if self.dynamic_image_size else (1, 1)

    @property
    def norm(self) -> NormConfig:
        """The card's ImageNet mean/std with rescale 1/255, the values GotOcr2 is configured with (`norm_of`)."""
        return NormConfig(self.image_mean, self.image_std)

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> InternVLConfig:
        """Read InternVL's ``config.json`` (``force_image_size``, else ``vision_config.image_size``;
        ``min_dynamic_patch``, ``max_dynamic_patch``, ``use_thumbnail``, ``dynamic_image_size``; defaults the
        card's: 448, 1, 12, True, True; mean/std the card's ImageNet constants), or an InternVL-hf
        ``GotOcr2ImageProcessor`` config (``size`` square, ``min_patches``, ``max_patches``, its mean/std;
        thumbnail on, as ``crop_image_to_patches`` defaults it). What the card cannot express (a resample other
        than BICUBIC, rescale or normalize off, another rescale factor) is refused."""
        return _reading(name, lambda: cls(**read.internvl_values(cfg, name)))


# The family config types. Each declares its ``kind`` once (``qwen``, ``internvl``: a geometry and pixels;
# ``norm``: normalization only) and its ``norm``: code elsewhere reads those, never the type (issue 29;
# tests/project/test_name_switches.py).
CONFIG_TYPES: tuple[type, ...] = (
    QwenVLConfig,
    PaddleOCRVLConfig,
    InternVLConfig,
    Glm4vConfig,
    MiMoConfig,
    ErnieVLConfig,
    (MiniCPMVConfig := minicpm_config_type(NormConfig)),  # built on NormConfig here: no import cycle
    NormConfig,
)

_READERS: dict[str, Any] = {
    "qwen2.5-vl": QwenVLConfig,
    "qwen3-vl": QwenVLConfig,
    "internvl": InternVLConfig,
    "paddleocr-vl": PaddleOCRVLConfig,
    "ernie-4.5-vl": ErnieVLConfig,
    "mimo-v2.5": MiMoConfig,
    "glm-4.1v": Glm4vConfig,
    "minicpm-v-4.6": MiniCPMVConfig,
}
# Every other published family is normalization-only: its values read as a NormConfig (no row to add here).
_READERS.update({name: NormConfig for name in PUBLISHED if name not in _READERS})

PROFILES: dict[str, tuple[QwenVLConfig | InternVLConfig | NormConfig, str]] = {
    name: (reader.from_preprocessor_config(PUBLISHED[name], name=name), SOURCES[name])
    for name, reader in _READERS.items()
}


def family_profile(name: str) -> QwenVLConfig | InternVLConfig | NormConfig:
    """The config of family profile ``name``; `InputValueError` in one line with the accepted names."""
    if not isinstance(name, str) or name not in PROFILES:
        got = name if isinstance(name, str) else f"a {type_name(name)}"
        raise InputValueError(f"unknown family profile {got!r}; accepted: {', '.join(PROFILES)}")
    return PROFILES[name][0]


def published_config(name: str) -> dict[str, Any]:
    """A copy of the published dict behind profile ``name`` (what transformers is handed in the tests)."""
    family_profile(name)
    return copy.deepcopy(PUBLISHED[name])


def norm_of(cfg: QwenVLConfig | InternVLConfig | NormConfig) -> NormConfig:
    """The rescale and normalize a family config implies in transformers' terms (its ``norm``; InternVL: ImageNet
    mean/std with rescale 1/255, the values GotOcr2 is configured with; the card's own ToTensor order is
    `reference.oracle.internvl.normalize_levels`)."""
    if not isinstance(cfg, CONFIG_TYPES):
        raise InputTypeError(f"cfg must be a QwenVLConfig, InternVLConfig or NormConfig, got {type_name(cfg)}")
    return cfg.norm
