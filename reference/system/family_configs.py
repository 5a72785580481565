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
in ``PUBLISHED`` (the tests hand them to transformers).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from deferlab.reference.system.validate import (
    check_bool,
    check_int,
    check_mapping,
    check_number,
    check_positive_int,
    check_str,
    type_name,
)

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)
RESCALE = 1 / 255  # transformers' default rescale_factor, 0.00392156862745098 as the configs write it
# Pillow's filter numbers (PIL.Image.Resampling), as a config's ``resample`` writes them.
RESAMPLE = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}
BICUBIC = 3
_C = TypeVar("_C")

# Class defaults of the transformers 5.24.0 image processors the families' configs name (the class
# attributes of each ``*ImageProcessorPil``; the torchvision class shares them). Keyed by the base name: a
# config's ``Fast``/``Pil`` suffix names the same class (image_processing_auto maps both).
_NORM = ("image_mean", "image_std", "rescale_factor", "do_rescale", "do_normalize")
_CLIP_NORM = {"image_mean": CLIP_MEAN, "image_std": CLIP_STD, "rescale_factor": RESCALE}
_ON = {"do_rescale": True, "do_normalize": True}
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "Qwen2VLImageProcessor": {
        **_CLIP_NORM,
        **_ON,
        "do_convert_rgb": True,
        "resample": BICUBIC,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "min_pixels": 56 * 56,
        "max_pixels": 28 * 28 * 1280,
    },
    "Glm4vImageProcessor": {**_CLIP_NORM, **_ON},
    "PixtralImageProcessor": {**_CLIP_NORM, **_ON},
    "Gemma3ImageProcessor": {"image_mean": HALF, "image_std": HALF, "rescale_factor": RESCALE, **_ON},
    "Gemma4ImageProcessor": {
        "image_mean": (0.0,) * 3,
        "image_std": (1.0,) * 3,
        "rescale_factor": RESCALE,
        "do_rescale": True,
        "do_normalize": False,
    },
    "GotOcr2ImageProcessor": {**_CLIP_NORM, **_ON, "resample": BICUBIC, "min_patches": 1, "max_patches": 12},
}
QWEN_CLASSES = ("Qwen2VLImageProcessor", "Qwen2_5_VLImageProcessor")
INTERNVL_ARCHITECTURES = ("InternVLChatModel",)
# What the InternVL 2.5/3 checkpoints' config.json set (semantics §18.5): an engine path reads a config dict with a
# key left out as these checkpoints have it (the remote InternVLChatConfig's own defaults differ; no deployment
# relies on them).
INTERNVL_CHECKPOINT_DEFAULTS: dict[str, Any] = {
    "force_image_size": 448,
    "image_size": 448,
    "patch_size": 14,
    "downsample_ratio": 0.5,
    "min_dynamic_patch": 1,
    "max_dynamic_patch": 12,
    "dynamic_image_size": True,
    "use_thumbnail": True,
}
_CONFIG_JSON_KEYS = (
    "force_image_size",
    "min_dynamic_patch",
    "max_dynamic_patch",
    "use_thumbnail",
    "dynamic_image_size",
)


def base_class(name: str) -> str:
    """A processor class name without transformers' backend suffix (``Fast``, ``Pil``)."""
    for suffix in ("Fast", "Pil"):
        if name.endswith(suffix) and name != suffix:
            return name[: -len(suffix)]
    return name


def _image_processor(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The image processor's own table: a ``processor_config.json`` nests it under ``image_processor``."""
    check_mapping("preprocessor config", cfg)
    inner = cfg.get("image_processor")
    return inner if isinstance(inner, Mapping) else cfg


def processor_class(cfg: Mapping[str, Any]) -> str:
    """The class a config names: ``image_processor_type``, else ``processor_class``, else the first of
    InternVL's ``architectures``; `ConfigError` in one line when it names none."""
    table = _image_processor(cfg)
    for key in ("image_processor_type", "processor_class"):
        for where in (table, cfg):
            if where.get(key) is not None:
                return check_str(key, where[key])
    arch = cfg.get("architectures")
    if isinstance(arch, list) and arch:
        return check_str("architectures[0]", arch[0])
    raise ConfigError(
        "preprocessor config names no class: it has none of image_processor_type, processor_class, "
        f"architectures (a non-empty list); its keys: {sorted(cfg)}"
    )


def _class_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of the class ``cfg`` names ({} for a class not in `CLASS_DEFAULTS`, or none named)."""
    try:
        name = processor_class(cfg)
    except ConfigError:
        return {}
    return CLASS_DEFAULTS.get(base_class(name), {})


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

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> NormConfig:
        """Read the five keys as transformers does: a missing or ``null`` key takes the named class's default;
        `ConfigError` when neither says (an unknown class that leaves a key out)."""
        return _reading(name, lambda: cls(**_values(cfg, _NORM, name)))


def _values(cfg: Mapping[str, Any], keys: tuple[str, ...], name: str) -> dict[str, Any]:
    """``keys`` of ``cfg``'s image-processor table, class defaults for the missing or null ones."""
    table, defaults = _image_processor(cfg), _class_defaults(cfg)
    out: dict[str, Any] = {}
    for key in keys:
        value = table.get(key)
        if value is None:
            if key not in defaults:
                cls_name = table.get("image_processor_type") or cfg.get("processor_class") or "no class"
                raise ConfigError(
                    f"preprocessor config {name!r} has no {key!r} and names {cls_name!r}, whose default deferlab "
                    f"does not know; accepted: the key, or a class of {sorted(CLASS_DEFAULTS)}"
                )
            value = defaults[key]
        out[key] = value
    return out


def _reading(name: str, build: Callable[[], _C]) -> _C:
    """Run ``build``; a validation error becomes `ConfigError` naming the config (one line)."""
    try:
        return build()
    except ConfigError:
        raise
    except (InputValueError, InputTypeError) as e:
        raise ConfigError(f"preprocessor config {name!r}: {e}") from None


@dataclass(frozen=True)
class QwenVLConfig:
    """Qwen2-VL's image processor settings (transformers ``Qwen2VLImageProcessor``; semantics §18.2)."""

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

    @property
    def factor(self) -> int:
        """patch_size * merge_size: every resized side is a multiple of it."""
        return self.patch_size * self.merge_size

    @property
    def norm(self) -> NormConfig:
        return NormConfig(self.image_mean, self.image_std, self.rescale_factor, self.do_rescale, self.do_normalize)

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> QwenVLConfig:
        """Read a Qwen2-VL-family config as transformers 5.24.0 does: ``size.shortest_edge`` /
        ``size.longest_edge`` bound the pixels, the legacy top-level ``min_pixels`` / ``max_pixels`` override
        them; a ``size`` without both bounds is refused (transformers' resize refuses it at call time);
        ``do_resize`` must be true (the restatement always resizes)."""
        return _reading(name, lambda: cls(**_qwen_values(cfg, name)))


def _qwen_values(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    table = _image_processor(cfg)
    kind = table.get("image_processor_type")
    if kind is not None and base_class(str(kind)) not in QWEN_CLASSES:
        raise ConfigError(
            f"preprocessor config {name!r} names {kind!r}; accepted: a Qwen2-VL image processor "
            f"({', '.join(QWEN_CLASSES)}, with or without Fast/Pil)"
        )
    if table.get("do_resize") is not None and table["do_resize"] is not True:
        raise ConfigError(f"preprocessor config {name!r}: do_resize must be true, got {table['do_resize']!r}")
    defaults = CLASS_DEFAULTS["Qwen2VLImageProcessor"]
    keys = ("patch_size", "temporal_patch_size", "merge_size", *_NORM, "do_convert_rgb", "resample")
    out = {k: defaults[k] if table.get(k) is None else table[k] for k in keys}
    size = table.get("size")
    bounds = {"min_pixels": defaults["min_pixels"], "max_pixels": defaults["max_pixels"]}
    if size is not None:
        check_mapping("size", size)
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            bounds[key] = size.get(edge)
    for key in bounds:  # the legacy keys win over size, as Qwen2VLImageProcessor.__init__ applies them
        if table.get(key) is not None:
            bounds[key] = table[key]
    for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        if bounds[key] is None:
            raise ConfigError(
                f"preprocessor config {name!r}: size has no {edge!r} (and no {key!r}): {size!r}; accepted: size with "
                "both shortest_edge and longest_edge, or the min_pixels / max_pixels keys"
            )
        bounds[key] = check_positive_int(f"{key} (size.{edge})", bounds[key])
    return {**out, **bounds}


@dataclass(frozen=True)
class InternVLConfig:
    """InternVL 2.5/3 preprocessing as the model card's ``load_image`` runs it (semantics §18.4): tiles of
    ``image_size``, a grid of ``min_num``..``max_num`` tiles, a thumbnail when ``use_thumbnail`` and more than
    one tile; ``dynamic_image_size`` off means one tile (min = max = 1, as vLLM reads it)."""

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

    @classmethod
    def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> InternVLConfig:
        """Read InternVL's ``config.json`` (``force_image_size``, else ``vision_config.image_size``;
        ``min_dynamic_patch``, ``max_dynamic_patch``, ``use_thumbnail``, ``dynamic_image_size``; defaults the
        card's: 448, 1, 12, True, True; mean/std the card's ImageNet constants), or an InternVL-hf
        ``GotOcr2ImageProcessor`` config (``size`` square, ``min_patches``, ``max_patches``, its mean/std;
        thumbnail on, as ``crop_image_to_patches`` defaults it). What the card cannot express (a resample other
        than BICUBIC, rescale or normalize off, another rescale factor) is refused."""
        return _reading(name, lambda: cls(**_internvl_values(cfg, name)))


def _internvl_values(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    check_mapping("config", cfg)
    table = _image_processor(cfg)
    if base_class(str(table.get("image_processor_type", ""))) == "GotOcr2ImageProcessor":
        return _got_ocr2_values(table, name)
    architectures = cfg.get("architectures") if isinstance(cfg.get("architectures"), list) else []
    if not any(k in cfg for k in _CONFIG_JSON_KEYS) and not set(architectures) & set(INTERNVL_ARCHITECTURES):
        raise ConfigError(
            f"config {name!r} is neither InternVL's config.json (keys {list(_CONFIG_JSON_KEYS)} or architectures "
            f"{list(INTERNVL_ARCHITECTURES)}) nor a GotOcr2ImageProcessor preprocessor config; its keys: {sorted(cfg)}"
        )
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    size = cfg.get("force_image_size") if cfg.get("force_image_size") is not None else vision.get("image_size", 448)
    given = {
        "min_num": cfg.get("min_dynamic_patch"),
        "max_num": cfg.get("max_dynamic_patch"),
        "use_thumbnail": cfg.get("use_thumbnail"),
        "dynamic_image_size": cfg.get("dynamic_image_size"),
    }
    return {"image_size": size, **{k: v for k, v in given.items() if v is not None}}


def _got_ocr2_values(table: Mapping[str, Any], name: str) -> dict[str, Any]:
    got = {
        k: CLASS_DEFAULTS["GotOcr2ImageProcessor"][k] if table.get(k) is None else table[k]
        for k in ("resample", "min_patches", "max_patches", *_NORM)
    }
    size = table.get("size")
    if not isinstance(size, Mapping) or size.get("height") is None or size.get("height") != size.get("width"):
        raise ConfigError(
            f"preprocessor config {name!r}: size must be a square {{'height': n, 'width': n}}, got {size!r}"
        )
    for key, wanted in (
        ("resample", BICUBIC),
        ("do_rescale", True),
        ("do_normalize", True),
        ("rescale_factor", RESCALE),
    ):
        if got[key] != wanted or isinstance(got[key], bool) != isinstance(wanted, bool):
            raise ConfigError(
                f"preprocessor config {name!r}: {key} is {got[key]!r}; accepted: {wanted!r} (the model card's "
                "load_image resizes BICUBIC and runs ToTensor and Normalize)"
            )
    return {
        "image_size": size["height"],
        "min_num": got["min_patches"],
        "max_num": got["max_patches"],
        "image_mean": got["image_mean"],
        "image_std": got["image_std"],
    }


# name -> the published dict (third-party copies where said; semantics §18.5 gives the sources in full)
PUBLISHED: dict[str, dict[str, Any]] = {
    "qwen2.5-vl": {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
    },
    "qwen3-vl": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    "internvl": {
        "architectures": ["InternVLChatModel"],
        "force_image_size": 448,
        "dynamic_image_size": True,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 12,
    },
    "glm-4.1v": {
        "size": {"shortest_edge": 12544, "longest_edge": 9633792},
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
    },
    "mistral3": {
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "rescale_factor": 0.00392156862745098,
        "patch_size": 14,
        "size": {"longest_edge": 1540},
        "resample": 3,
        "image_processor_type": "PixtralImageProcessorFast",
        "processor_class": "PixtralProcessor",
    },
    "gemma3": {
        "image_mean": list(HALF),
        "image_std": list(HALF),
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 896, "width": 896},
        "resample": 2,
        "image_seq_length": 256,
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
    },
    "gemma4": {
        "do_normalize": False,
        "do_rescale": True,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
        "rescale_factor": 0.00392156862745098,
        "patch_size": 16,
        "pooling_kernel_size": 3,
        "max_soft_tokens": 280,
        "resample": 3,
        "image_processor_type": "Gemma4ImageProcessor",
        "processor_class": "Gemma4Processor",
    },
}

_THIRD = "third-party copy of the official file"
SOURCES: dict[str, str] = {
    "qwen2.5-vl": f"Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json, {_THIRD} "
    "(unsloth/Qwen2.5-VL-7B-Instruct-bnb-4bit; the same values in 32B and 72B copies)",
    "qwen3-vl": f"Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json, {_THIRD} "
    "(cdreetz/Qwen3-VL-8B-Instruct; the same values in Qwen3-VL-4B and Qwen3.5 copies)",
    "internvl": "OpenGVLab/InternVL3_5-8B config.json (refs/pr/12) and an InternVL2_5-8B copy for the tiling keys; "
    "use_thumbnail and the ImageNet mean/std from the model card's load_image (use_thumbnail=True), "
    "the config's own use_thumbnail unverified",
    "glm-4.1v": f"a GLM-4.1V-based checkpoint's preprocessor_config.json, {_THIRD} (hsb47gx6/AutoGLM-Phone-9B); "
    "GLM-4.1V-9B-Thinking's own image config unverified (its video config has the same mean/std)",
    "mistral3": f"mistralai/Mistral-Small-3.1-24B-Base-2503 preprocessor_config.json, {_THIRD} "
    "(MtTinker/Mistral-Small-3.1-24B-Base-2503)",
    "gemma3": f"google/gemma-3-4b-it preprocessor_config.json, {_THIRD} (Synthetica-AI/gemma-3-4b-it)",
    "gemma4": f"a Gemma 4 processor_config.json, {_THIRD} (win10/K1-31B; rnagabh/gemma4-vision-encoder agrees)",
}

_READERS: dict[str, Any] = {
    "qwen2.5-vl": QwenVLConfig,
    "qwen3-vl": QwenVLConfig,
    "internvl": InternVLConfig,
    "glm-4.1v": NormConfig,
    "mistral3": NormConfig,
    "gemma3": NormConfig,
    "gemma4": NormConfig,
}

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
    """The rescale and normalize a family config implies in transformers' terms (InternVL: ImageNet
    mean/std with rescale 1/255, the values GotOcr2 is configured with; the card's own ToTensor order is
    `reference.oracle.internvl.normalize_levels`)."""
    if isinstance(cfg, NormConfig):
        return cfg
    if isinstance(cfg, QwenVLConfig):
        return cfg.norm
    if isinstance(cfg, InternVLConfig):
        return NormConfig(cfg.image_mean, cfg.image_std)
    raise InputTypeError(f"cfg must be a QwenVLConfig, InternVLConfig or NormConfig, got {type_name(cfg)}")
